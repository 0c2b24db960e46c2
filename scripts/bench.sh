#!/usr/bin/env bash
# bench.sh (`make bench`): throughput of the real oncesync binary against a bare
# baseline on the local fake Brevo, then the Go micro-benchmarks.
#
#   1. bulk path:   200,000 contacts, pages of 500 (POST /contacts/import per page)
#   2. single path:  20,000 contacts, pages of 250 (POST /contacts per record, so fewer rows)
#   3. the shared rate limit: 4 syncs on one Brevo account over serve + 2 workers (PostgreSQL, Redis)
#      against a fake allowing 10 requests/s: the 429 share and the budget used (BENCH_ACCOUNTS=0 skips it)
#   3b. the stores side by side: the bulk path (100,000 contacts, pages of 500) on SQLite and on PostgreSQL
#      + Redis, interleaved, and their ratio (ONCESYNC_TEST_DATABASE_URL, ONCESYNC_TEST_REDIS_URL; BENCH_STORECMP=0 skips it)
#   4. sources: the bulk path reading the contacts from a MySQL/MariaDB table (BENCH_MYSQL_URL, default
#      ONCESYNC_TEST_MYSQL_URL or mysql://root@127.0.0.1:3306/; BENCH_MYSQL=0 skips it); oncesync-bench parquet:
#      records/s over BENCH_BULK_RECORDS contacts as a CSV file and as a directory of Parquet files, then peak
#      RSS for a 1,000,000-row Parquet directory (BENCH_PARQUET=0 skips it); oncesync-bench shopify: customers
#      from the fake Shopify (BENCH_SHOPIFY=0 skips it)
#   5. destinations: the klaviyo bulk path: 100,000 profiles, pages of 500 (a profile bulk import job per page);
#      the HubSpot bulk path: BENCH_HUBSPOT_RECORDS (100,000) contacts, pages of 500 (batch/upsert of 100)
#      against fakehubspot, with its own bare baseline (BENCH_HUBSPOT=0 skips it)
#   6. scripts/bench-peer.sh: oncesync vs Benthos v4.60.0 (ratio, kill -9 duplicates) and
#      oncesync's peak RSS for 100,000 and 1,000,000 rows (BENCH_PEER=0 skips it)
#   7. many machines (docs/PERFORMANCE.md#many-machines-2026-12-02; BENCH_SCALE=0 skips them): records/s of a bulk run of
#      100,000 new contacts with 100,000 and 1,000,000 entries already in the sync's ledger, on the embedded
#      store and on PostgreSQL + Redis, with disk bytes per entry (oncesync-bench ledger; 10,000,000 is in
#      `make bench-scale`); a partitioned sync of BENCH_SCALEOUT_ROWS (100,000; 1,000,000 in bench-scale)
#      PostgreSQL rows into a fake with 50 ms per request over 1, 2 and 4 processes (oncesync-bench
#      scaleout); the leader's work per cron tick with 10,000 syncs on PostgreSQL (oncesync-bench schedule,
#      publishes 10,000 syncs, then waits for a minute's tick: 3 to 5 minutes). About 10 minutes in all
#   8. go test -bench for internal/... (store ledger ops, CSV paging)
#
# Each throughput figure is the median of BENCH_RUNS runs (default 3) with the
# spread; see docs/PERFORMANCE.md for how to read them. About 5-6 minutes on 2 cores
# (plus about 3 the first time, while bench-peer.sh builds Benthos).
#
# Variables: BENCH_RUNS (3), BENCH_BULK_RECORDS (200000), BENCH_SINGLE_RECORDS (20000), BENCH_KLAVIYO_RECORDS (100000),
# BENCH_MICRO (1: run the Go micro-benchmarks; 0 to skip), BENCHTIME (go test -benchtime, 1s).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
RUNS=${BENCH_RUNS:-3}
BULK=${BENCH_BULK_RECORDS:-200000}
SINGLE=${BENCH_SINGLE_RECORDS:-20000}
KLAVIYO=${BENCH_KLAVIYO_RECORDS:-100000}
MICRO=${BENCH_MICRO:-1}
BENCHTIME=${BENCHTIME:-1s}

echo "== oncesync bench, $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
echo "machine: $(nproc) cpus, ${cpu:-unknown cpu}, $(uname -sm)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime) (1, 5, 15 min; other work on the machine skews the numbers)"
echo "tmp:     ${TMPDIR:-/tmp} on $(df -T "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR==2 {print $2}') (the SQLite store and its fsyncs live here)"
$GO version
echo

$GO build -o bin/oncesync ./cmd/oncesync
$GO build -o bin/oncesync-bench ./cmd/oncesync-bench

echo "== bulk path: bin/oncesync-bench --mode bulk --records $BULK --page-size 500 --runs $RUNS"
bin/oncesync-bench --mode bulk --records "$BULK" --page-size 500 --runs "$RUNS"
echo
echo "== single path: bin/oncesync-bench --mode single --records $SINGLE --page-size 250 --runs $RUNS"
bin/oncesync-bench --mode single --records "$SINGLE" --page-size 250 --runs "$RUNS"

if [[ "${BENCH_ACCOUNTS:-1}" != 0 ]]; then
	echo
	echo "== shared rate limit: bin/oncesync-bench accounts --syncs 4 --workers 2 --records 100 --rate 10"
	bin/oncesync-bench accounts --syncs 4 --workers 2 --records 100 --rate 10
fi

if [[ "${BENCH_STORECMP:-1}" != 0 ]]; then
	echo
	echo "== stores side by side: bin/oncesync-bench storecmp --records 100000 --page-size 500 --runs $RUNS"
	bin/oncesync-bench storecmp --records 100000 --page-size 500 --runs "$RUNS"
fi

if [[ "${BENCH_MYSQL:-1}" != 0 ]]; then
	MYSQL_URL=${BENCH_MYSQL_URL:-${ONCESYNC_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/}}
	echo
	echo "== MySQL source: bin/oncesync-bench --source mysql --mode bulk --records $BULK --page-size 500 --runs $RUNS"
	bin/oncesync-bench --source mysql --mysql-url "$MYSQL_URL" --mode bulk --records "$BULK" --page-size 500 --runs "$RUNS"
fi

if [[ "${BENCH_KLAVIYO:-1}" != 0 ]]; then
	echo
	echo "== klaviyo bulk path: bin/oncesync-bench --destination klaviyo --records $KLAVIYO --page-size 500 --runs $RUNS"
	bin/oncesync-bench --destination klaviyo --records "$KLAVIYO" --page-size 500 --runs "$RUNS"
fi

if [[ "${BENCH_PARQUET:-1}" != 0 ]]; then
	echo
	echo "== parquet source: bin/oncesync-bench parquet --records $BULK --rss-records 1000000 --runs $RUNS"
	bin/oncesync-bench parquet --records "$BULK" --rss-records 1000000 --runs "$RUNS"
fi

if [[ "${BENCH_SHOPIFY:-1}" != 0 ]]; then
	echo
	echo "== shopify source: bin/oncesync-bench shopify --records $BULK --runs $RUNS"
	bin/oncesync-bench shopify --records "$BULK" --runs "$RUNS"
fi

if [[ "${BENCH_HUBSPOT:-1}" != 0 ]]; then
	HUBSPOT=${BENCH_HUBSPOT_RECORDS:-100000}
	echo
	echo "== hubspot bulk path: bin/oncesync-bench hubspot --records $HUBSPOT --page-size 500 --runs $RUNS"
	bin/oncesync-bench hubspot --records "$HUBSPOT" --page-size 500 --runs "$RUNS"
fi

if [[ "${BENCH_PEER:-1}" != 0 ]]; then
	echo
	echo "== peer and memory: bash scripts/bench-peer.sh"
	bash scripts/bench-peer.sh
fi

if [[ "${BENCH_SCALE:-1}" != 0 ]]; then
	LEDGER_RUNS=${BENCH_LEDGER_RUNS:-2}
	SCALEOUT=${BENCH_SCALEOUT_ROWS:-100000}
	echo
	echo "== ledger growth: bin/oncesync-bench ledger --entries 100000,1000000 --records 100000 --runs $LEDGER_RUNS"
	bin/oncesync-bench ledger --entries 100000,1000000 --records 100000 --runs "$LEDGER_RUNS"
	echo
	echo "== scale-out: bin/oncesync-bench scaleout --rows $SCALEOUT --processes 1,2,4"
	bin/oncesync-bench scaleout --rows "$SCALEOUT" --processes 1,2,4
	echo
	echo "== scheduling: bin/oncesync-bench schedule --syncs 10000 --ticks 1"
	bin/oncesync-bench schedule --syncs 10000 --ticks 1
fi

if [[ "$MICRO" != 0 ]]; then
	echo
	echo "== micro-benchmarks: go test -run '^\$' -bench . -benchmem -benchtime $BENCHTIME ./internal/..."
	$GO test -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" ./internal/...
fi
