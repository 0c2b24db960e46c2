package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakehubspot"
)

// hubspotBatch is HubSpot's largest batch, the baseline's too.
const hubspotBatch = 100

// hubspotMain is `oncesync-bench hubspot`: the HubSpot bulk path
// (batch/upsert, 100 contacts a request) of the real binary against a
// bare baseline (`hubspot-baseline`) that reads the same CSV and posts the
// same batches to the same in-process fake HubSpot, one after another,
// with nothing else. A fresh fake serves each run; its counters are checked.
func hubspotMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("oncesync-bench hubspot", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var p benchParams
	fs.IntVar(&p.Records, "records", 100_000, "contacts in the generated CSV")
	fs.IntVar(&p.PageSize, "page-size", 500, "records per page (sent in batches of 100)")
	fs.IntVar(&p.Runs, "runs", 3, "measurements per side; the median and spread are reported")
	fs.StringVar(&p.Bin, "bin", "bin/oncesync", "the oncesync binary")
	fs.StringVar(&p.Dir, "dir", "", "where the work dir is created (default: the system temp dir)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if p.Records <= 0 || p.Runs <= 0 || p.PageSize < 1 || p.PageSize > 10000 {
		return fmt.Errorf("%w: --records and --runs must be positive, --page-size 1 to 10000", errUsage)
	}
	p.Mode = "bulk"
	bin, err := filepath.Abs(p.Bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w: the oncesync binary %s is missing; build it with `go build -o bin/oncesync ./cmd/oncesync`", errUsage, p.Bin)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(p.Dir, "oncesync-bench-hubspot-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := &bench{benchParams: p, bin: bin, self: self, work: work, log: stderr}
	b.csvPath = filepath.Join(work, "contacts.csv")
	if err := writeContacts(b.csvPath, p.Records); err != nil {
		return fmt.Errorf("generate the CSV: %w", err)
	}
	// No rate limit, no faults: the numbers are oncesync's cost.
	var fake atomic.Pointer[fakehubspot.Server]
	reset := func() { fake.Store(fakehubspot.New(fakehubspot.Options{Token: benchAPIKey, RateLimit: -1})) }
	reset()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fake.Load().ServeHTTP(w, r) }),
		ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	b.baseURL = "http://" + ln.Addr().String()
	wantRequests := int64(0)
	for from := 0; from < p.Records; from += p.PageSize {
		wantRequests += int64((min(p.PageSize, p.Records-from) + hubspotBatch - 1) / hubspotBatch)
	}
	check := func(who string) (fakehubspot.Stats, error) {
		st := fake.Load().Stats()
		n := int64(p.Records)
		if st.Contacts != n || st.ContactsWritten != n || st.DuplicateWrites != 0 || st.Invalid != 0 || st.Rejected != 0 ||
			st.Requests != wantRequests {
			return st, fmt.Errorf("%s: the fake's counters are wrong: contacts %d, written %d, duplicates %d, invalid %d, rejected %d, requests %d (want %d, %d, 0, 0, 0, %d)",
				who, st.Contacts, st.ContactsWritten, st.DuplicateWrites, st.Invalid, st.Rejected, st.Requests, n, n, wantRequests)
		}
		return st, nil
	}
	var once, base []sample
	for i := 1; i <= p.Runs; i++ {
		fmt.Fprintf(stderr, "run %d/%d: oncesync ...", i, p.Runs)
		dir := filepath.Join(work, fmt.Sprintf("run-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		cfg := filepath.Join(dir, "oncesync.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`store: sqlite://%s
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: %s
    workspace: bench
    source: {type: csv, path: %s, page_size: %d, identity: id}
    destination: {type: hubspot, base_url: %s, token: ${%s}, mode: bulk, rate_limit: 0}
    mapping: {email: email, attributes: {firstname: first_name, lastname: last_name}}
`, filepath.Join(dir, "oncesync.db"), syncID, b.csvPath, p.PageSize, b.baseURL, apiKeyEnv)), 0o600); err != nil {
			return err
		}
		reset()
		s, out, err := b.timed(ctx, filepath.Join(dir, "run.log"), bin, "run", "--config", cfg, syncID)
		if err != nil {
			return err
		}
		sum, err := parseSummary(out)
		if err != nil {
			return err
		}
		if sum.state != "succeeded" || sum.written != int64(p.Records) {
			return fmt.Errorf("oncesync said %q, want succeeded with %d written", sum.line, p.Records)
		}
		if _, err := check("oncesync"); err != nil {
			return err
		}
		once = append(once, s)
		fmt.Fprintf(stderr, " %.0f records/s; baseline ...", s.RecordsPerSec)
		reset()
		s, out, err = b.timed(ctx, filepath.Join(work, "baseline.log"), self, "hubspot-baseline", "--csv", b.csvPath,
			"--url", b.baseURL, "--page-size", strconv.Itoa(p.PageSize))
		if err != nil {
			return err
		}
		var res baselineResult
		if err := json.Unmarshal(lastLine(out), &res); err != nil || res.Records != int64(p.Records) {
			return fmt.Errorf("the baseline printed %q, want %d records", lastLine(out), p.Records)
		}
		if _, err := check("baseline"); err != nil {
			return err
		}
		base = append(base, s)
		fmt.Fprintf(stderr, " %.0f records/s\n", s.RecordsPerSec)
	}
	o, bs := summarize(once), summarize(base)
	fmt.Fprintf(stdout, "oncesync-bench hubspot: bulk path (batch/upsert, %d per request), %d records, pages of %d, %d runs per side (median [min-max]); %s, %s\n",
		hubspotBatch, p.Records, p.PageSize, p.Runs, machine(), runtime.Version())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "records\toncesync records/s\tbaseline records/s\tratio\tfake duplicate_writes\t")
	fmt.Fprintf(tw, "%d\t%.0f [%.0f-%.0f]\t%.0f [%.0f-%.0f]\t%.2f\t0\t\n", p.Records, o.Median, o.Min, o.Max, bs.Median, bs.Min, bs.Max, o.Median/bs.Median)
	_ = tw.Flush()
	fmt.Fprintf(stdout, "cpu per run (user+sys, median): oncesync %.2fs, baseline %.2fs\n", o.CPUSecs, bs.CPUSecs)
	return nil
}

// hubspotBaselineMain is the hidden `hubspot-baseline`: the CSV, page by
// page, each page in batch/upsert requests of 100 contacts with the body
// oncesync sends, one request after another; nothing else. It prints
// {"records": N, "requests": M}.
func hubspotBaselineMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("hubspot-baseline", pflag.ContinueOnError)
	var csvPath, base string
	var pageSize int
	fs.StringVar(&csvPath, "csv", "", "the CSV")
	fs.StringVar(&base, "url", "", "the fake's root URL")
	fs.IntVar(&pageSize, "page-size", 500, "records per page")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	token := os.Getenv(apiKeyEnv)
	f, err := os.Open(csvPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReaderSize(f, 64<<10))
	header, err := cr.Read()
	if err != nil {
		return err
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	type input struct {
		ID         string            `json:"id"`
		IDProperty string            `json:"idProperty"`
		Properties map[string]string `json:"properties"`
	}
	client := &http.Client{Timeout: defaultTimeout}
	defer client.CloseIdleConnections()
	var res baselineResult
	send := func(batch []input) error {
		body, err := json.Marshal(map[string]any{"inputs": batch})
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/crm/v3/objects/contacts/batch/upsert", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
		resp.Body.Close()
		if err != nil {
			return err
		}
		var out struct {
			Results []json.RawMessage `json:"results"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || len(out.Results) != len(batch) {
			return fmt.Errorf("batch/upsert answered %d with %d results for %d inputs", resp.StatusCode, len(out.Results), len(batch))
		}
		res.Requests++
		res.Records += int64(len(batch))
		return nil
	}
	page := make([]input, 0, pageSize)
	flush := func() error {
		for from := 0; from < len(page); from += hubspotBatch {
			if err := send(page[from:min(from+hubspotBatch, len(page))]); err != nil {
				return err
			}
		}
		page = page[:0]
		return nil
	}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		page = append(page, input{ID: row[col["email"]], IDProperty: "email",
			Properties: map[string]string{"firstname": row[col["first_name"]], "lastname": row[col["last_name"]]}})
		if len(page) == pageSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}
