#!/usr/bin/env bash
# bench-scale.sh (`make bench-scale`): the long measurements of many machines
# (docs/PERFORMANCE.md#many-machines-2026-12-02), too long for `make bench`:
#
#   1. ledger growth: records/s of one bulk run of 100,000 new contacts into the fake Brevo with
#      100,000, 1,000,000 and 10,000,000 entries already in the sync's ledger, on the embedded store
#      (SQLite) and on PostgreSQL + Redis, with disk bytes per entry. Filling 10,000,000 entries takes
#      minutes per store (SQLite through the store's API, PostgreSQL by INSERT ... SELECT).
#   2. scale-out: a partitioned sync of 1,000,000 PostgreSQL rows into a fake Brevo with 50 ms per
#      request over 1, 2 and 4 processes (serve + workers).
#
# Needs PostgreSQL and Redis (ONCESYNC_TEST_DATABASE_URL, ONCESYNC_TEST_REDIS_URL; the Makefile runs
# this under scripts/test-services.sh) and about 5 GB free in TMPDIR and on the PostgreSQL server.
# Variables: BENCH_SCALE_ENTRIES (100000,1000000,10000000), BENCH_SCALE_STORES (sqlite,postgres),
# BENCH_SCALE_RUNS (1), BENCH_SCALEOUT_ROWS (1000000), BENCH_SCALE_LEDGER=0 / BENCH_SCALE_SCALEOUT=0
# skip a part.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
ENTRIES=${BENCH_SCALE_ENTRIES:-100000,1000000,10000000}
STORES=${BENCH_SCALE_STORES:-sqlite,postgres}
RUNS=${BENCH_SCALE_RUNS:-1}
ROWS=${BENCH_SCALEOUT_ROWS:-1000000}

echo "== oncesync bench-scale, $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "machine: $(nproc) cpus, $(uname -sm)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime) (1, 5, 15 min)"
$GO version
echo

$GO build -o bin/oncesync ./cmd/oncesync
$GO build -o bin/oncesync-bench ./cmd/oncesync-bench

if [[ "${BENCH_SCALE_LEDGER:-1}" != 0 ]]; then
	echo "== ledger growth: bin/oncesync-bench ledger --entries $ENTRIES --stores $STORES --records 100000 --runs $RUNS"
	bin/oncesync-bench ledger --entries "$ENTRIES" --stores "$STORES" --records 100000 --runs "$RUNS"
	echo
fi
if [[ "${BENCH_SCALE_SCALEOUT:-1}" != 0 ]]; then
	echo "== scale-out: bin/oncesync-bench scaleout --rows $ROWS --processes 1,2,4"
	bin/oncesync-bench scaleout --rows "$ROWS" --processes 1,2,4
fi
