#!/usr/bin/env bash
# Mutation testing of the Go shim (npm run mutate:go; docs/mutation.md "The Go shim"): gremlins
# (github.com/go-gremlins/gremlins), pinned in the tools module tools/gomutate (`go get -tool`; never a
# dependency of shim/), built into .tools/gremlins (the first build fetches its modules from the Go
# module proxy), then run over shim/ with its own go test: every covered mutant of the default
# mutators (arithmetic, conditional boundary and negation, increment/decrement, negation) is built
# and tested. A habit command like npm run mutate: about 600 mutants, each a go test of the package
# (the process tests build the binary too); WORKERS (default 2) side by side. TIMEOUT_COEFFICIENT
# (default 30) times the coverage run's time is a mutant's limit: lower, and a loaded machine turns
# slow runs into "timed out". Results: reports/gremlins.json and the log on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/go-env.sh
steward_go_use
steward_go_check "mutate:go: FAILED" || exit 1
mkdir -p .tools reports
(cd tools/gomutate && GOFLAGS= go build -o ../../.tools/gremlins github.com/go-gremlins/gremlins/cmd/gremlins)
cd shim
export CGO_ENABLED=0 GOPROXY=off GOTOOLCHAIN=local GOFLAGS=
exec ../.tools/gremlins unleash --workers "${WORKERS:-2}" --test-cpu 1 \
  --timeout-coefficient "${TIMEOUT_COEFFICIENT:-30}" -o ../reports/gremlins.json .
