# Sourced (not run) by setup.sh, test.sh and start.sh: puts the Node.js the project ships on PATH.
#
# The image runs its daemon on Node 24 (.node-version); the tests must run on the same. Where the
# machine's own Node is older (these Debian machines have Node 20), `steward_node_install` fetches
# the official binary and headers from the npm registry's node-linux-<arch> package into .node/
# (gitignored), and `steward_node_use` puts .node/bin first on PATH and points node-gyp at its
# headers, so an addon that compiles (none today: better-sqlite3 13 ships prebuilt ones) downloads nothing.

STEWARD_ROOT=${STEWARD_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
STEWARD_NODE_VERSION=${STEWARD_NODE_VERSION:-$(tr -d ' \n' <"$STEWARD_ROOT/.node-version")}
STEWARD_NODE_DIR="$STEWARD_ROOT/.node"

steward_node_major() { "${1:-node}" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# True when the machine's own node is at least the shipped major version.
steward_machine_node_ok() {
  command -v node >/dev/null 2>&1 && [ "$(steward_node_major node)" -ge "${STEWARD_NODE_VERSION%%.*}" ]
}

steward_node_install() {
  if steward_machine_node_ok && [ ! -x "$STEWARD_NODE_DIR/bin/node" ]; then return 0; fi
  if [ -x "$STEWARD_NODE_DIR/bin/node" ] && [ "$("$STEWARD_NODE_DIR/bin/node" --version)" = "v$STEWARD_NODE_VERSION" ]; then
    return 0
  fi
  local arch work
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "setup: no official Node.js package for $(uname -m); install Node $STEWARD_NODE_VERSION by hand" >&2; return 1 ;;
  esac
  command -v npm >/dev/null 2>&1 || { echo "setup: npm is needed to fetch Node $STEWARD_NODE_VERSION" >&2; return 1; }
  echo "setup: the machine's Node is $(node --version 2>/dev/null || echo missing); installing Node $STEWARD_NODE_VERSION (npm package node-linux-$arch) into .node/"
  work=$(mktemp -d)
  (cd "$work" && npm pack --silent "node-linux-$arch@$STEWARD_NODE_VERSION" >/dev/null) || { rm -rf "$work"; return 1; }
  rm -rf "$STEWARD_NODE_DIR" && mkdir -p "$STEWARD_NODE_DIR"
  tar -xzf "$work"/node-linux-"$arch"-*.tgz -C "$STEWARD_NODE_DIR" --strip-components=1
  rm -rf "$work"
  "$STEWARD_NODE_DIR/bin/node" --version >/dev/null
}

steward_node_use() {
  if [ -x "$STEWARD_NODE_DIR/bin/node" ]; then
    case ":$PATH:" in *":$STEWARD_NODE_DIR/bin:"*) ;; *) PATH="$STEWARD_NODE_DIR/bin:$PATH" ;; esac
    # node-gyp builds against these headers, with no download (a user npmrc may name another Node's
    # as nodedir: this takes precedence). node-gyp's own prefix, not npm_config_nodedir, which npm 11
    # warns about as an unknown env config.
    export npm_package_config_node_gyp_nodedir="$STEWARD_NODE_DIR"
    export PATH
  fi
}
