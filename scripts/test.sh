#!/usr/bin/env bash
# The whole test suite from a fresh clone: setup (packages, npm ci + build), then npm test.
# The integration tests need root (network namespaces, bridges).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" != 0 ]; then
  echo "test: the integration tests create network namespaces and need root" >&2
  exit 1
fi
npm test
