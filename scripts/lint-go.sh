#!/usr/bin/env bash
# Lint of the Go shim (part of npm run lint): gofmt must have nothing to say, and go vet neither.
# Without Go (a user who is not root on a machine without golang-go) it says so and skips, unless
# STEWARD_E2E_REQUIRE=1 (CI), where that is a failure.
set -euo pipefail
cd "$(dirname "$0")/../shim"
if ! command -v go >/dev/null 2>&1; then
  echo "lint: Go is missing: gofmt and go vet of shim/ skipped (install golang-go)" >&2
  [ "${STEWARD_E2E_REQUIRE:-}" = 1 ] && exit 1
  exit 0
fi
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "lint: gofmt would change: $unformatted" >&2
  exit 1
fi
CGO_ENABLED=0 GOPROXY=off go vet ./...
