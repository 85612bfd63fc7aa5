#!/usr/bin/env bash
# The Go shim's tests (npm run test:go): go vet, go test (the contract's vectors in shared/vectors/,
# the unit tests, the fuzz targets' seed corpus) with its coverage (at least 90 % of statements), then a short run of each fuzz
# target (a fixed number of executions each, about 20, 10 and 10 s: about 45 s together with the rest).
# `npm run fuzz:go` runs them longer (FUZZ_GO_SECONDS=300 each by default).
set -euo pipefail
cd "$(dirname "$0")/../shim"
# The Go of shim/go.mod's version or newer: the go on PATH, else /usr/local/go/bin/go (scripts/go-env.sh);
# an older or missing one fails here in one line.
source ../scripts/go-env.sh
steward_go_use
steward_go_check "test:go: FAILED" || exit 1
export CGO_ENABLED=0 GOPROXY=off GOTOOLCHAIN=local GOFLAGS=
echo "test:go: $(go version) ($(command -v go))"
go vet ./...
# Statement coverage of every package has a floor (issue 32): 90 %. The output is shown whether go test
# passed or not (under set -e a failing $(…) would end the script before printing what failed).
status=0
out=$(go test -count=1 -cover ./... 2>&1) || status=$?
echo "$out"
if [ "$status" -ne 0 ]; then
  echo "test:go: FAILED: go test exited $status (its output above)" >&2
  exit 1
fi
low=$(awk '/coverage: [0-9.]+% of statements/ { for (i = 1; i <= NF; i++) if ($i == "coverage:") { p = $(i + 1); sub("%", "", p); if (p + 0 < 90) print $2 " " p "%" } }' <<<"$out")
pkgs=$(grep -c 'coverage: [0-9.]*% of statements' <<<"$out" || true)
if [ "$pkgs" -eq 0 ] || [ -n "$low" ]; then
  echo "test:go: FAILED: statement coverage under the 90 % floor: ${low:-no package reported coverage}" >&2
  exit 1
fi
# The short run counts executions, not seconds: with a duration, Go 1.26's fuzz coordinator can fail a
# target that found nothing ("context deadline exceeded", no reproducer written; golang/go#75804, fixed
# in Go 1.27), as CI saw once. The counts are about 20, 10 and 10 s here on a quiet machine (4,300,
# 13,600 and 18,700 execs a second); a loaded one takes longer instead of failing. FUZZ_GO_SECONDS
# (npm run fuzz:go) keeps a duration.
if [ -n "${FUZZ_GO_SECONDS:-}" ]; then
  call="${FUZZ_GO_SECONDS}s" parse="${FUZZ_GO_SECONDS}s" top="${FUZZ_GO_SECONDS}s"
else
  call=80000x parse=120000x top=160000x
fi
# -parallel 1: one fuzzing worker; the machines this runs on have two cores and other work.
go test -run '^$' -fuzz '^FuzzCall$' -fuzztime "$call" -parallel 1 .
go test -run '^$' -fuzz '^FuzzParseResponse$' -fuzztime "$parse" -parallel 1 .
go test -run '^$' -fuzz '^FuzzTopLevel$' -fuzztime "$top" -parallel 1 .
