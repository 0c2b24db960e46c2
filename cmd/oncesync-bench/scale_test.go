package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("100000, 1_000_000,3")
	if err != nil || !slices.Equal(got, []int{100000, 1000000, 3}) {
		t.Fatalf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "1,,2", "-5"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

// TestProcFigures reads this process's own CPU time and memory.
func TestProcFigures(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	pid := os.Getpid()
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	if rss := procStatusKiB(pid, "VmRSS"); rss < 64<<10 {
		t.Fatalf("VmRSS = %d KiB with 64 MiB in use", rss)
	}
	if procStatusKiB(pid, "NoSuchField") != 0 {
		t.Fatal("an unknown field read as non-zero")
	}
	// Burn CPU until the kernel's 10 ms ticks show it.
	start := procCPU(pid)
	x := 0
	for procCPU(pid) < start+50e6 {
		for i := range 1_000_000 {
			x += i * int(buf[i%len(buf)])
		}
	}
	if procCPU(pid) <= start || x == 0 {
		t.Fatal("procCPU did not grow")
	}
}

// TestFillSQLite fills a small ledger through the store's API and reads it
// back: every entry complete, with the filled Result.
func TestFillSQLite(t *testing.T) {
	ctx := context.Background()
	b := &bench{log: io.Discard, work: t.TempDir()}
	lb := &ledgerBench{b: b, kind: "sqlite", entries: 12_345, syncID: "fill-test"}
	defer lb.cleanup()
	path, perEntry, err := lb.fillSQLite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if perEntry < 32 || perEntry > 2000 {
		t.Errorf("%.0f bytes per entry", perEntry)
	}
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The fill's pages are 5000 keys: the first, one in the middle of the
	// last page (12,345 = 2 * 5000 + 2345) and one past the end.
	first := hashedKeys(1<<41, 1)[0]
	last := hashedKeys(1<<41+2, 2345)[2344]
	beyond := hashedKeys(1<<41+2, 2346)[2345]
	got, err := st.LedgerGet(ctx, "fill-test", []string{first, last, beyond})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[first].State != store.LedgerComplete || got[last].State != store.LedgerComplete {
		t.Fatalf("LedgerGet = %+v, want the first and the last key complete, nothing else", got)
	}
	if got[first].Result != prefillResult(0) || got[last].Result != prefillResult(12_344) {
		t.Fatalf("results %q, %q", got[first].Result, got[last].Result)
	}
	if len(got[first].Result) != 45 {
		t.Fatalf("result of %d bytes, want a slot's 45", len(got[first].Result))
	}
}

// TestFillPostgres fills a small ledger and its copy on the test server.
func TestFillPostgres(t *testing.T) {
	server := os.Getenv("ONCESYNC_TEST_DATABASE_URL")
	if server == "" {
		t.Skip("ONCESYNC_TEST_DATABASE_URL is not set")
	}
	ctx := context.Background()
	lb := &ledgerBench{b: &bench{log: io.Discard}, kind: "postgres", entries: 1234, syncID: "fill-test", serverURL: server}
	defer lb.cleanup()
	tmpl, perEntry, err := lb.fillPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if perEntry < 64 || perEntry > 4000 {
		t.Errorf("%.0f bytes per entry", perEntry)
	}
	cp, err := lb.copyOf(ctx, tmpl, 1)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, complete, keys int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'complete' AND sync_id = 'fill-test'),
		count(DISTINCT key) FROM oncesync.ledger`).Scan(&n, &complete, &keys); err != nil {
		t.Fatal(err)
	}
	if n != 1234 || complete != 1234 || keys != 1234 {
		t.Fatalf("the copy holds %d entries (%d complete, %d keys), want 1234", n, complete, keys)
	}
}

// TestLedgerBenchEndToEnd runs `ledger` on the embedded store with the real
// binary and small sizes.
func TestLedgerBenchEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the oncesync binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "oncesync")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/oncesync/oncesync/cmd/oncesync").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var out, log bytes.Buffer
	err := ledgerMain(context.Background(), []string{"--oncesync", bin, "--stores", "sqlite", "--entries", "1000,6000",
		"--records", "700", "--page-size", "100", "--dir", dir}, &out, &log)
	if err != nil {
		t.Fatalf("ledger: %v\n%s", err, log.String())
	}
	for _, want := range []string{"sqlite            1000", "sqlite            6000", "1.00x"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
