#!/usr/bin/env bash
# fuzz-ci.sh: run every `func Fuzz*` target in the module for FUZZTIME each and
# fail when any of them finds a crash (or does not build).
#
#   bash scripts/fuzz-ci.sh              # 10s per target
#   FUZZTIME=60s bash scripts/fuzz-ci.sh # the issue's acceptance budget
#
# `make test` runs it with TEST_FUZZTIME (5s) after the unit tests, so CI fuzzes
# on every run; `make fuzz` runs it with FUZZTIME. Every target runs even after
# a failure, then a table of targets, executions and results is printed. A
# crash leaves its input in the package's testdata/fuzz/FuzzName/ (go test
# writes it there); `go test -run 'FuzzName/ID' ./pkg` replays it.
#
# Variables: FUZZTIME (10s; a duration or Nx), FUZZMINIMIZETIME (1000x; see
# below), FUZZ_MATCH (only targets whose "dir name" matches this extended
# regexp), GO (go).
#
# Why -fuzzminimizetime: Go's fuzzer minimizes every input that finds new
# coverage, in one worker, for up to -fuzzminimizetime (default 60s) per
# input; when that time (or -fuzztime) runs out first, the coordinator stops
# the worker and none of its calls show in "execs". A smaller input must keep
# *every* new coverage bit, and some bits depend on the exact input length (a
# regexp scanning the whole file; hit counts are rounded to powers of two) or
# on whether a GC ran during the call (sync.poolCleanup is instrumented). For
# FuzzLoad's kilobyte YAML inputs almost no byte can go, so the minimizer works
# through its O(n^2) candidates until the 60 s are gone: with a fresh fuzz
# cache both workers did that and FuzzLoad ran 22 inputs in 60 s. 1000x caps
# each minimization at 1000 calls of the fuzz function (a crasher still gets
# those 1000 tries at shrinking); 0 turns minimization off.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-1000x}
FUZZ_MATCH=${FUZZ_MATCH:-}

# "./internal/config FuzzLoad" per line, sorted, from the test files.
targets=$(grep -rE --include='*_test.go' --exclude-dir=vendor --exclude-dir=testdata --exclude-dir=.git \
	'^func Fuzz[A-Za-z0-9_]*\(' . |
	sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort -u || true)
if [[ -n "$FUZZ_MATCH" ]]; then
	targets=$(grep -E -- "$FUZZ_MATCH" <<<"$targets" || true)
fi
if [[ -z "$targets" ]]; then
	echo "fuzz-ci: no Fuzz targets found"
	exit 0
fi

n=$(wc -l <<<"$targets")
echo "fuzz-ci: $n targets, $FUZZTIME each, minimizing at most $FUZZMINIMIZETIME, $(nproc) cpus"
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

summary=()
failed=0
start_all=$SECONDS
while read -r dir name; do
	log="$logdir/$name.log"
	echo "==> $GO test -run '^\$' -fuzz '^$name\$' -fuzztime $FUZZTIME -fuzzminimizetime $FUZZMINIMIZETIME $dir"
	t0=$SECONDS
	result=
	for try in 1 2 3; do
		if $GO test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$dir" >"$log" 2>&1; then
			result=ok
			break
		fi
		# Go's fuzz coordinator sometimes ends a time-boxed run with "context
		# deadline exceeded" and no failing input (a toolchain race, not a
		# finding). Anything else, or a saved failing input, is a real failure.
		if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:' "$log"; then
			echo "fuzz-ci: $dir $name ended with Go's fuzz deadline race (no failing input); trying again ($try/3)" >&2
			continue
		fi
		break
	done
	if [[ "$result" == ok ]]; then
		:
	else
		result=FAIL
		failed=$((failed + 1))
		echo "fuzz-ci: $dir $name FAILED; its output ends with:" >&2
		tail -n 40 "$log" >&2
	fi
	secs=$((SECONDS - t0))
	# The last progress line: "fuzz: elapsed: 5s, execs: 123456 (24680/sec), new interesting: 3 (total: 40)".
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2 || true)
	interesting=$(grep -oE 'new interesting: [0-9]+ \(total: [0-9]+\)' "$log" | tail -n 1 || true)
	summary+=("$(printf '%-32s %-18s %-4s %6ss %12s  %s' "$dir" "$name" "$result" "$secs" "${execs:-?}" "${interesting:-}")")
done <<<"$targets"

echo
printf '%-32s %-18s %-4s %7s %12s  %s\n' package target res wall execs corpus
printf '%s\n' "${summary[@]}"
echo "fuzz-ci: $n targets in $((SECONDS - start_all))s (including compiles), $failed failed"
if ((failed > 0)); then
	exit 1
fi
