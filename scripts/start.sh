#!/usr/bin/env bash
# The main job: stewardd on a local socket with its SQLite database under ./.steward/
# (no root needed to serve; running delegate plugins in real netns needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-env.sh
steward_node_use
mkdir -p .steward
exec node bin/stewardd run \
  --socket "${STEWARD_SOCKET:-$PWD/.steward/stewardd.sock}" \
  --state-dir "${STEWARD_STATE_DIR:-$PWD/.steward/state}" \
  --bin-dir /opt/cni/bin --bin-dir /usr/lib/cni "$@"
