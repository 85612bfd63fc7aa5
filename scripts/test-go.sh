#!/usr/bin/env bash
# The Go shim's tests (npm run test:go): go vet, go test (the contract's vectors in shared/vectors/,
# the unit tests, the fuzz targets' seed corpus) with its coverage (at least 90 % of statements), then a short run of each fuzz
# target (FUZZ_GO_SECONDS each, default 20, 10 and 10: about 45 s together with the rest).
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
call=${FUZZ_GO_SECONDS:-20}
answer=${FUZZ_GO_SECONDS:-10}
# -parallel 1: one fuzzing worker; the machines this runs on have two cores and other work.
go test -run '^$' -fuzz '^FuzzCall$' -fuzztime "${call}s" -parallel 1 .
go test -run '^$' -fuzz '^FuzzParseResponse$' -fuzztime "${answer}s" -parallel 1 .
go test -run '^$' -fuzz '^FuzzTopLevel$' -fuzztime "${answer}s" -parallel 1 .
