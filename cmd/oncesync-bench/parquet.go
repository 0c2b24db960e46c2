package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	pq "github.com/parquet-go/parquet-go"
	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// parquetRow is a contact of the generated Parquet export: the columns of
// writeContacts's CSV, id as an integer as a warehouse writes it.
type parquetRow struct {
	ID        int64  `parquet:"id"`
	Email     string `parquet:"email"`
	FirstName string `parquet:"first_name"`
	LastName  string `parquet:"last_name"`
}

// writeParquetDir writes n contacts (those of writeContacts) as files of
// perFile rows in dir, row groups of 100,000, snappy-compressed (what
// Spark and DuckDB write by default).
func writeParquetDir(dir string, n, perFile int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	first := []string{"Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Leslie"}
	last := []string{"Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Lamport"}
	for part, from := 0, 1; from <= n; part, from = part+1, from+perFile {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%05d.parquet", part)))
		if err != nil {
			return err
		}
		w := pq.NewGenericWriter[parquetRow](f, pq.MaxRowsPerRowGroup(100_000), pq.Compression(&pq.Snappy))
		rows := make([]parquetRow, 0, 1000)
		for i := from; i <= min(n, from+perFile-1); i++ {
			rows = append(rows, parquetRow{ID: int64(i), Email: fmt.Sprintf("contact%07d@example.com", i), FirstName: first[i%10], LastName: last[(i/10)%10]})
			if len(rows) == cap(rows) || i == min(n, from+perFile-1) {
				if _, err := w.Write(rows); err != nil {
					f.Close()
					return err
				}
				rows = rows[:0]
			}
		}
		if err := w.Close(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// dirBytes is the size of the files in dir.
func dirBytes(dir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !fi.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// parquetMain is the `parquet` subcommand: records/s of `oncesync run` over
// the same contacts as a CSV file and as a directory of Parquet files
// (bulk path, fresh SQLite store per run, interleaved), then the peak RSS
// of one run over a --rss-records-row Parquet directory.
func parquetMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("parquet", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	records := fs.Int("records", 200_000, "contacts for the throughput runs")
	perFile := fs.Int("per-file", 100_000, "rows per Parquet file")
	rssRecords := fs.Int("rss-records", 1_000_000, "rows of the Parquet directory whose run's peak RSS is measured (0 skips)")
	pageSize := fs.Int("page-size", 500, "records per page")
	runs := fs.Int("runs", 3, "throughput runs per source; the median is reported")
	bin := fs.String("bin", "bin/oncesync", "the oncesync binary")
	dir := fs.String("dir", "", "where the work dir is created (default: the system temp dir)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 || *records <= 0 || *perFile <= 0 || *runs <= 0 || *rssRecords < 0 || *pageSize < 1 || *pageSize > 10000 {
		return fmt.Errorf("%w: parquet [--records N] [--per-file N] [--rss-records N] [--page-size 1..10000] [--runs N]", errUsage)
	}
	binAbs, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(binAbs); err != nil {
		return fmt.Errorf("%w: the oncesync binary %s is missing; build it with `go build -o bin/oncesync ./cmd/oncesync`", errUsage, *bin)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(*dir, "oncesync-parquet-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	fake, baseURL, stop, err := newFakeServer(fakebrevo.Options{APIKey: benchAPIKey})
	if err != nil {
		return err
	}
	defer stop()

	b := &bench{
		benchParams: benchParams{Records: *records, PageSize: *pageSize, Mode: "bulk", Concurrency: defaultConcurrency},
		bin:         binAbs, self: self, work: work, fake: fake, baseURL: baseURL, log: stderr,
		csvPath: filepath.Join(work, "contacts.csv"),
	}
	pqDir := filepath.Join(work, "export")
	if err := writeContacts(b.csvPath, *records); err != nil {
		return fmt.Errorf("generate the CSV: %w", err)
	}
	if err := writeParquetDir(pqDir, *records, *perFile); err != nil {
		return fmt.Errorf("generate the Parquet files: %w", err)
	}
	sources := []struct{ name, typ, path string }{{"csv", "csv", b.csvPath}, {"parquet", "parquet", pqDir}}
	rates := map[string][]float64{}
	rss := map[string]int64{}
	for i := 1; i <= *runs; i++ {
		for _, s := range sources {
			ps, err := b.sourcePass(ctx, filepath.Join(work, fmt.Sprintf("%s-%d", s.name, i)), s.typ, s.path)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", s.name, i, err)
			}
			rates[s.name] = append(rates[s.name], ps.RecordsPerSec)
			rss[s.name] = max(rss[s.name], ps.MaxRSSKiB)
			fmt.Fprintf(stderr, "run %d/%d: %s %.0f records/s, peak RSS %.1f MiB\n", i, *runs, s.name, ps.RecordsPerSec, kibToMiB(ps.MaxRSSKiB))
		}
	}
	fmt.Fprintf(stdout, "oncesync-bench parquet: `oncesync run`, bulk path, pages of %d, %s contacts, median of %d runs; %s (%s)\n",
		*pageSize, thousands(float64(*records)), *runs, machine(), filepath.Base(binAbs))
	fmt.Fprintf(stdout, "  csv:      %s records/s (%.1f MB file), peak RSS %.1f MiB\n", thousands(median(rates["csv"])), float64(fileSize(b.csvPath))/1e6, kibToMiB(rss["csv"]))
	fmt.Fprintf(stdout, "  parquet:  %s records/s (%.1f MB in %d files), peak RSS %.1f MiB\n", thousands(median(rates["parquet"])),
		float64(dirBytes(pqDir))/1e6, (*records+*perFile-1) / *perFile, kibToMiB(rss["parquet"]))
	if *rssRecords == 0 {
		return nil
	}
	_ = os.RemoveAll(pqDir)
	_ = os.Remove(b.csvPath)
	big := filepath.Join(work, "export-rss")
	if err := writeParquetDir(big, *rssRecords, *perFile); err != nil {
		return fmt.Errorf("generate the Parquet files: %w", err)
	}
	b.Records = *rssRecords
	ps, err := b.sourcePass(ctx, filepath.Join(work, "rss"), "parquet", big)
	if err != nil {
		return fmt.Errorf("rss run: %w", err)
	}
	verdict := "met"
	if kibToMiB(ps.MaxRSSKiB) >= rssGoalMiB {
		verdict = "NOT met"
	}
	fmt.Fprintf(stdout, "  parquet RSS: %s rows (%.1f MB in %d files): peak RSS %.1f MiB, %s records/s; goal < %d MiB: %s\n",
		thousands(float64(*rssRecords)), float64(dirBytes(big))/1e6, (*rssRecords+*perFile-1) / *perFile,
		kibToMiB(ps.MaxRSSKiB), thousands(ps.RecordsPerSec), rssGoalMiB, verdict)
	if verdict != "met" {
		return fmt.Errorf("peak RSS %.1f MiB for %d Parquet rows: the goal is under %d MiB", kibToMiB(ps.MaxRSSKiB), *rssRecords, rssGoalMiB)
	}
	return nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// sourcePass runs `oncesync run` over a source of type typ at path on a
// fresh store in dir, under the rusage wrapper, and checks its summary and
// the fake's counters as oncesyncPass does.
func (b *bench) sourcePass(ctx context.Context, dir, typ, path string) (passSample, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return passSample{}, err
	}
	cfg := fmt.Sprintf(`store: sqlite://%s
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: %s
    workspace: bench
    source: {type: %s, path: %s, page_size: %d, identity: id}
    destination: {type: brevo, base_url: %s, api_key: ${%s}, mode: bulk, list_ids: [2], rate_limit: 1000000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, filepath.Join(dir, "oncesync.db"), syncID, typ, strconv.Quote(path), b.PageSize, b.baseURL, apiKeyEnv)
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return passSample{}, err
	}
	b.fake.Reset()
	r, err := runMeasured(ctx, b.self, filepath.Join(dir, "run.log"), []string{b.bin, "run", "--config", cfgPath, syncID})
	if err != nil {
		return passSample{}, err
	}
	sum, err := parseSummary(r.Output)
	if err != nil {
		return passSample{}, err
	}
	if sum.state != "succeeded" || sum.written != int64(b.Records) || sum.read != int64(b.Records) {
		return passSample{}, fmt.Errorf("oncesync said %q, want succeeded with %d read and written", sum.line, b.Records)
	}
	st := b.fake.Stats()
	if err := b.checkFull(st); err != nil {
		return passSample{}, err
	}
	return passSample{Wall: r.Wall, CPU: r.CPU, RecordsPerSec: float64(b.Records) / r.Wall.Seconds(),
		MaxRSSKiB: r.MaxRSSKiB, Requests: st.Requests, Duplicates: st.DuplicateWrites}, nil
}
