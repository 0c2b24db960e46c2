#!/usr/bin/env bash
# bench-peer.sh (part of `make bench`): oncesync side by side with a real peer,
# Benthos, and oncesync's peak RSS for large sources.
#
#   1. builds Benthos $BENTHOS_VERSION from the Go module proxy in a throwaway
#      module outside the repo (nothing vendored, go.mod untouched) and caches
#      the binary as bin/benthos-$BENTHOS_VERSION (bin/ is gitignored);
#   2. bin/oncesync-bench peer: oncesync and Benthos read the same CSV and post
#      the same import pages to the same in-process fake Brevo (throughput,
#      median of PEER_RUNS, and the ratio), then each is kill -9'd at 40% and
#      restarted, and the fake's duplicate_writes are printed for each;
#   3. bin/oncesync-bench rss: oncesync's peak RSS for RSS_RECORDS-row sources.
#
# About 3 minutes on 2 cores (plus about 3 the first time, to build Benthos).
# Variables: BENTHOS_VERSION (v4.60.0), PEER_RECORDS (200000), PEER_RUNS
# (BENCH_RUNS or 3), PEER_KILL_AT (0.4), RSS_RECORDS (100000,1000000; empty
# skips), GO (go).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
BENTHOS_VERSION=${BENTHOS_VERSION:-v4.60.0}
PEER_RECORDS=${PEER_RECORDS:-200000}
PEER_RUNS=${PEER_RUNS:-${BENCH_RUNS:-3}}
PEER_KILL_AT=${PEER_KILL_AT:-0.4}
RSS_RECORDS=${RSS_RECORDS-100000,1000000}
BENTHOS=bin/benthos-$BENTHOS_VERSION

mkdir -p bin
$GO build -o bin/oncesync ./cmd/oncesync
$GO build -o bin/oncesync-bench ./cmd/oncesync-bench

if [[ ! -x "$BENTHOS" ]]; then
	echo "== building Benthos $BENTHOS_VERSION (github.com/redpanda-data/benthos/v4) from the Go module proxy"
	repo=$PWD
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	cat >"$tmp/main.go" <<'EOF'
// Command benthos is Benthos with its pure and io components (csv input,
// archive and mapping processors, http_client output), built for oncesync's bench.
package main

import (
	"context"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"
)

func main() {
	service.RunCLI(context.Background())
}
EOF
	(
		cd "$tmp"
		export GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=mod"
		$GO mod init benthosbench >/dev/null 2>&1
		$GO get "github.com/redpanda-data/benthos/v4@$BENTHOS_VERSION" \
			"github.com/redpanda-data/benthos/v4/public/service@$BENTHOS_VERSION" \
			"github.com/redpanda-data/benthos/v4/public/components/io@$BENTHOS_VERSION" \
			"github.com/redpanda-data/benthos/v4/public/components/pure@$BENTHOS_VERSION"
		$GO build -trimpath -o "$repo/$BENTHOS.tmp" .
	)
	mv "$BENTHOS.tmp" "$BENTHOS"
fi
echo "benthos: $BENTHOS ($("$BENTHOS" --version 2>/dev/null | head -n 1))"

echo "== peer: bin/oncesync-bench peer --benthos $BENTHOS --records $PEER_RECORDS --page-size 500 --runs $PEER_RUNS --kill-at $PEER_KILL_AT"
bin/oncesync-bench peer --benthos "$BENTHOS" --records "$PEER_RECORDS" --page-size 500 --runs "$PEER_RUNS" --kill-at "$PEER_KILL_AT"

if [[ -n "$RSS_RECORDS" ]]; then
	echo
	echo "== peak RSS: bin/oncesync-bench rss --records $RSS_RECORDS --page-size 500"
	bin/oncesync-bench rss --records "$RSS_RECORDS" --page-size 500
fi
