#!/usr/bin/env bash
# lint.sh: gofmt (fails on any unformatted file), go vet, and staticcheck when it is already installed.
# Nothing is downloaded at run time.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
status=0

files=$(git ls-files --cached --others --exclude-standard -- '*.go' 2>/dev/null || find . -name '*.go' -not -path './vendor/*')
if [[ -n "$files" ]]; then
	# shellcheck disable=SC2086 # word splitting on file names is intended (Go files have no spaces here)
	unformatted=$(gofmt -l $files)
	if [[ -n "$unformatted" ]]; then
		echo "lint: gofmt would change these files (run gofmt -w):" >&2
		printf '  %s\n' $unformatted >&2
		status=1
	fi
fi

echo "lint: go vet ./..."
$GO vet ./... || status=1

staticcheck=$(command -v staticcheck || true)
if [[ -z "$staticcheck" ]]; then
	gobin=$($GO env GOBIN)
	[[ -n "$gobin" ]] || gobin="$($GO env GOPATH | cut -d: -f1)/bin"
	[[ -x "$gobin/staticcheck" ]] && staticcheck="$gobin/staticcheck"
fi
if [[ -n "$staticcheck" ]]; then
	echo "lint: staticcheck ./..."
	"$staticcheck" ./... || status=1
else
	echo "lint: staticcheck not installed; skipped (go install honnef.co/go/tools/cmd/staticcheck@latest)"
fi

[[ $status -eq 0 ]] && echo "lint: ok"
exit "$status"
