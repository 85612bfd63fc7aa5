#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks for cni-steward, then `npm ci` (which builds).
# As root it installs the system packages; otherwise it says exactly what is missing. Go builds the
# shim and is not installed here: it is the machine's toolchain, at least the version shim/go.mod names
# (the go on PATH, else /usr/local/go/bin/go: scripts/go-env.sh; Debian bookworm's golang-go is Go 1.19,
# too old). An older Go fails setup in one line; without any Go, setup says so in one line and goes on
# (the daemon builds and serves without the shim; npm run build says the same).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need: the reference CNI plugins (delegates), iproute2 (netns),
# iptables (portmap, bridge ipMasq), a toolchain for native addons (should a dependency compile one), curl and
# hyperfine for `npm run bench` (the shim is measured against curl), and prometheus (the server and
# promtool: deploy/monitoring/ is tested with the real thing; the tests run their own server on a free
# loopback port and never use the packaged service, which only starts where systemd runs).
PACKAGES=(containernetworking-plugins iproute2 iptables python3 make g++ curl hyperfine prometheus ${EXTRA_APT_PACKAGES:-})

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: install them as root: apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

# Go: checked before Node is fetched; npm ci's `prepare` builds the shim with it (scripts/build-shims.mjs
# resolves the same go).
source scripts/go-env.sh
steward_go_use
go_rc=0
steward_go_check setup || go_rc=$?
case "$go_rc" in
  0) echo "setup: $(go version) ($(command -v go))" ;;
  2) echo "setup: without Go the shim (dist/steward) is not built; the daemon is" >&2 ;;
  *) exit 1 ;;
esac

# The Node.js the image ships (.node-version): the machine's own if it is that major version,
# else the official binary fetched into .node/ (scripts/node-env.sh). npm ci runs under it, so
# dependencies' engines are checked against it and addons load on the Node that ships.
source scripts/node-env.sh
steward_node_install
steward_node_use
echo "setup: Node $(node --version) ($(command -v node))"

npm ci --no-audit --no-fund

# Jaeger, the tracing backend test/integration/tracing.test.ts exports to: built from tools/jaeger/ by
# the machine's Go through the Go module proxy, into a cache outside the repo (reused at once once
# built; a first build takes about 4-11 minutes on 2 cores), bounded by STEWARD_JAEGER_BUILD_TIMEOUT
# (default 1800 s). STEWARD_SETUP_JAEGER=0 skips it. A failure does not fail setup: the daemon needs
# none of it, and the tracing test then says why it cannot run (a failure under STEWARD_E2E_REQUIRE=1).
if [ "$go_rc" = 0 ] && [ "${STEWARD_SETUP_JAEGER:-1}" != 0 ]; then
  bash scripts/build-jaeger.sh || echo "setup: Jaeger was not built; test/integration/tracing.test.ts cannot run" >&2
fi
