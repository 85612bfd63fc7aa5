#!/usr/bin/env bash
# Installs what the end-to-end suite (test/e2e, `npm run test:e2e`) needs to run real container
# runtimes: podman 4.3 with the CNI backend, runc, conmon, a static busybox for the container rootfs,
# and containerd 1.6 with ctr and its CRI plugin; for the CRI suite (test/e2e/cri.test.ts): gcc and libc6-dev
# (it compiles its static pause binary, test/helpers/cri/pause.c); for the DaemonSet pod test
# (test/e2e/image/pod.test.ts): catatonit (podman's pause binary for `podman kube play`), and buildah,
# debootstrap and file to build the image (scripts/build-image.sh). Idempotent: installs only what is
# missing, configures nothing.
# (The suite itself writes its podman drop-in, conflists and containerd config, each under a name of
# its own or a temp dir, and removes them when it ends: see test/helpers/runtimes/.)
#
# As root on Debian it installs with apt (--no-install-recommends). Otherwise it only says what is
# missing and exits 0: the suite then skips with a printed reason.
set -euo pipefail

PACKAGES=(podman containernetworking-plugins runc conmon busybox-static iptables iproute2 containerd
          catatonit buildah debootstrap file gcc libc6-dev)

if [ "$(uname -s)" != Linux ]; then
  echo "e2e-setup: not Linux; the e2e suite will be skipped" >&2
  exit 0
fi
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "e2e-setup: no dpkg here (not Debian); install by hand: ${PACKAGES[*]}" >&2
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "e2e-setup: runtime packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "e2e-setup: missing Debian packages: ${missing[*]}" >&2
  echo "e2e-setup: as root: apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 0
fi
echo "e2e-setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Nothing here starts a service: the suite runs its own containerd on a temp socket.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "e2e-setup: installed"
