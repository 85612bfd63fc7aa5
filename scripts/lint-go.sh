#!/usr/bin/env bash
# Lint of the Go shim (part of npm run lint): gofmt must have nothing to say, and go vet neither, with
# the Go of shim/go.mod's version or newer (the go on PATH, else /usr/local/go/bin/go: scripts/go-env.sh).
# Without Go (a machine without /usr/local/go or a go on PATH) it says so and skips, unless
# STEWARD_E2E_REQUIRE=1 (CI), where that is a failure; a Go older than go.mod's fails in one line.
set -euo pipefail
cd "$(dirname "$0")/../shim"
source ../scripts/go-env.sh
steward_go_use
rc=0
steward_go_check lint || rc=$?
if [ "$rc" = 2 ]; then
  echo "lint: gofmt and go vet of shim/ skipped" >&2
  [ "${STEWARD_E2E_REQUIRE:-}" = 1 ] && exit 1
  exit 0
fi
[ "$rc" = 0 ] || exit 1
# gofmt of the same toolchain as go (formatting can change between releases).
unformatted=$("$(go env GOROOT)/bin/gofmt" -l .)
if [ -n "$unformatted" ]; then
  echo "lint: gofmt would change: $unformatted" >&2
  exit 1
fi
CGO_ENABLED=0 GOPROXY=off GOTOOLCHAIN=local go vet ./...
