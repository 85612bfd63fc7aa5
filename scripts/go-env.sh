# Sourced (not run) by setup.sh, test.sh, test-go.sh, lint-go.sh and build-image.sh: finds the Go that
# builds the shim. scripts/build-shims.mjs (under node) resolves its go binary by the same rule.
#
# The oldest Go the shim builds with is the `go` line of shim/go.mod, the one place it is written.
# `steward_go_use` keeps the `go` on PATH when it is at least that version; otherwise, when
# $STEWARD_GO_FALLBACK (default /usr/local/go/bin: where these machines, go.dev's tarball and the
# official golang image put Go) holds a go that is, it puts that directory first on PATH (Debian
# bookworm's golang-go, /usr/bin/go, is Go 1.19). It exports GOTOOLCHAIN=local, so no go ever downloads
# another toolchain (a Go 1.21+ older than go.mod's version would, even for `go version` in shim/).
# The scripts that build also set GOPROXY=off: the shim requires no module.
# `steward_go_check PREFIX` then returns 0 when the go on PATH is new enough, else prints ONE line
# saying why not, starting with PREFIX, and returns 1 (too old) or 2 (missing).

STEWARD_ROOT=${STEWARD_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
STEWARD_GO_FALLBACK=${STEWARD_GO_FALLBACK:-/usr/local/go/bin}

# shim/go.mod's `go 1.26` -> 1.26
steward_go_required() { sed -n 's/^go[[:space:]]\{1,\}\([0-9][0-9.]*\)[[:space:]]*$/\1/p' "$STEWARD_ROOT/shim/go.mod" | head -n 1; }

# `go version go1.26.8 linux/amd64` -> 1.26.8 (go1.27rc1 -> 1.27); empty when it does not run.
steward_go_version() {
  GOTOOLCHAIN=local "$1" version 2>/dev/null | grep -o 'go[0-9][0-9.]*' | head -n 1 | sed 's/^go//; s/\.$//' || true
}

# True when version $1 >= version $2, comparing dot-separated numbers (1.26 = 1.26.0).
steward_version_ge() {
  local IFS=. i x y
  local -a a b
  read -r -a a <<<"$1"
  read -r -a b <<<"$2"
  for ((i = 0; i < ${#a[@]} || i < ${#b[@]}; i++)); do
    x=$((10#${a[i]:-0})) y=$((10#${b[i]:-0}))
    if [ "$x" -gt "$y" ]; then return 0; fi
    if [ "$x" -lt "$y" ]; then return 1; fi
  done
  return 0
}

steward_go_new_enough() {
  local have need
  need=$(steward_go_required)
  have=$(steward_go_version "$1")
  [ -n "$need" ] && [ -n "$have" ] && steward_version_ge "$have" "$need"
}

steward_go_use() {
  export GOTOOLCHAIN=local
  if command -v go >/dev/null 2>&1 && steward_go_new_enough "$(command -v go)"; then return 0; fi
  if [ -x "$STEWARD_GO_FALLBACK/go" ] && steward_go_new_enough "$STEWARD_GO_FALLBACK/go"; then
    PATH="$STEWARD_GO_FALLBACK:$PATH"
    export PATH
  fi
  return 0
}

steward_go_check() {
  local prefix=$1 need at have install
  need=$(steward_go_required)
  install="install Go $need+ (https://go.dev/dl/; $STEWARD_GO_FALLBACK/go is used when the go on PATH is missing or older)"
  if [ -z "$need" ]; then
    echo "$prefix: shim/go.mod has no 'go' line naming the oldest Go it builds with" >&2
    return 1
  fi
  if at=$(command -v go 2>/dev/null); then
    :
  elif [ -x "$STEWARD_GO_FALLBACK/go" ]; then
    at="$STEWARD_GO_FALLBACK/go"
  else
    echo "$prefix: Go is missing (no go on PATH, none in $STEWARD_GO_FALLBACK); $install" >&2
    return 2
  fi
  have=$(steward_go_version "$at")
  if [ -n "$have" ] && steward_version_ge "$have" "$need"; then return 0; fi
  echo "$prefix: Go ${have:-of unknown version} at $at is older than the go $need shim/go.mod requires; $install" >&2
  return 1
}
