#!/usr/bin/env bash
# The whole test suite from a fresh clone: setup (packages, npm ci + build), then npm test.
# The integration and end-to-end suites need root (network namespaces, bridges, container
# runtimes). Without root, everything that does not is run (build, typecheck, lint, the unit tests,
# which include the engine's logic on an in-memory journal) and the skipped suites are named.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" != 0 ]; then
  npm run build
  npm run typecheck
  npm run lint
  npm run test:unit
  echo "test: SKIPPED test:integration and test:e2e: they create network namespaces, bridges and containers and need root; run this script as root for the whole suite" >&2
  exit 0
fi
npm test
