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
	"time"

	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// The Klaviyo bench (`oncesync-bench --destination klaviyo`): the bulk path
// of the klaviyo destination (one profile bulk import job per page, then
// the job polled until complete) against a bare baseline doing the same
// HTTP work (the same job bodies, then GET of each job) against the same
// in-process fake Klaviyo. The fake applies jobs before its 202 (no delay),
// does not check requests against the spec and does not enforce Klaviyo's
// rate limits: the limits (150 jobs a minute) or the validator, not
// oncesync, would set the pace. oncesync's client-side pacing is lifted
// alike (rate_limit: 1000000).

const klaviyoRevision = "2026-07-15"

type klaviyoBench struct {
	benchParams
	bin, self, work, csvPath, baseURL string
	fake                              *fakeklaviyo.Server
	log                               io.Writer
}

func runKlaviyoBench(ctx context.Context, p benchParams, log io.Writer) (report, error) {
	if p.Mode != "bulk" {
		return report{}, fmt.Errorf("%w: the klaviyo bench measures the bulk path only", errUsage)
	}
	b := &klaviyoBench{benchParams: p, log: log}
	var err error
	if b.bin, err = filepath.Abs(p.Bin); err != nil {
		return report{}, err
	}
	if _, err := os.Stat(b.bin); err != nil {
		return report{}, fmt.Errorf("%w: the oncesync binary %s is missing", errUsage, p.Bin)
	}
	if b.self, err = os.Executable(); err != nil {
		return report{}, err
	}
	if b.work, err = os.MkdirTemp(p.Dir, "oncesync-bench-klaviyo-*"); err != nil {
		return report{}, err
	}
	if !p.Keep {
		defer os.RemoveAll(b.work)
	}
	b.csvPath = filepath.Join(b.work, "contacts.csv")
	if err := writeContacts(b.csvPath, p.Records); err != nil {
		return report{}, err
	}
	b.fake = fakeklaviyo.New(fakeklaviyo.Options{APIKey: benchAPIKey})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return report{}, err
	}
	srv := &http.Server{Handler: b.fake, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	b.baseURL = "http://" + ln.Addr().String()

	rep := report{Mode: "klaviyo bulk", Records: p.Records, PageSize: p.PageSize, Runs: p.Runs,
		Machine: machine(), Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version()}
	var once, base []sample
	for i := 1; i <= p.Runs; i++ {
		if err := ctx.Err(); err != nil {
			return report{}, err
		}
		fmt.Fprintf(log, "run %d/%d: oncesync ...", i, p.Runs)
		s, err := b.oncesyncRun(ctx, filepath.Join(b.work, fmt.Sprintf("run-%d", i)))
		if err != nil {
			fmt.Fprintln(log)
			return report{}, fmt.Errorf("oncesync run %d: %w", i, err)
		}
		once = append(once, s)
		fmt.Fprintf(log, " %.0f records/s;", s.RecordsPerSec)
		s, err = b.baselineRun(ctx)
		if err != nil {
			fmt.Fprintln(log)
			return report{}, fmt.Errorf("baseline run %d: %w", i, err)
		}
		base = append(base, s)
		fmt.Fprintf(log, " baseline %.0f records/s\n", s.RecordsPerSec)
		rep.PairRatios = append(rep.PairRatios, once[i-1].RecordsPerSec/s.RecordsPerSec)
	}
	rep.Oncesync, rep.Baseline = summarize(once), summarize(base)
	rep.Ratio = rep.Oncesync.Median / rep.Baseline.Median
	return rep, nil
}

func (b *klaviyoBench) jobs() int64 { return int64((b.Records + b.PageSize - 1) / b.PageSize) }

func (b *klaviyoBench) oncesyncRun(ctx context.Context, dir string) (sample, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sample{}, err
	}
	cfg := fmt.Sprintf(`store: sqlite://%s
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: %s
    workspace: bench
    source: {type: csv, path: %s, page_size: %d, identity: id}
    destination: {type: klaviyo, base_url: %s, api_key: ${%s}, mode: bulk, list_id: Bench1, rate_limit: 1000000}
    mapping: {email: email, attributes: {first_name: first_name, last_name: last_name}}
`, filepath.Join(dir, "oncesync.db"), syncID, b.csvPath, b.PageSize, b.baseURL, apiKeyEnv)
	path := filepath.Join(dir, "oncesync.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return sample{}, err
	}
	b.fake.Reset()
	s, out, err := b.timed(ctx, filepath.Join(dir, "run.log"), b.bin, "run", "--config", path, syncID)
	if err != nil {
		return sample{}, err
	}
	sum, err := parseSummary(out)
	if err != nil {
		return sample{}, err
	}
	if sum.state != "succeeded" || sum.written != int64(b.Records) {
		return sample{}, fmt.Errorf("oncesync said %q, want succeeded with %d written", sum.line, b.Records)
	}
	st := b.fake.Stats()
	s.Requests, s.Duplicates = st.Requests, st.DuplicateWrites
	return s, b.check(st)
}

func (b *klaviyoBench) baselineRun(ctx context.Context) (sample, error) {
	b.fake.Reset()
	s, out, err := b.timed(ctx, filepath.Join(b.work, "baseline.log"), b.self, "baseline-klaviyo", "--csv", b.csvPath,
		"--url", b.baseURL, "--page-size", strconv.Itoa(b.PageSize))
	if err != nil {
		return sample{}, err
	}
	var res baselineResult
	if err := json.Unmarshal(lastLine(out), &res); err != nil || res.Records != int64(b.Records) {
		return sample{}, fmt.Errorf("the baseline printed %q, want %d records", lastLine(out), b.Records)
	}
	st := b.fake.Stats()
	s.Requests, s.Duplicates = st.Requests, st.DuplicateWrites
	return s, b.check(st)
}

// check: every profile once, one job per page.
func (b *klaviyoBench) check(st fakeklaviyo.Stats) error {
	n := int64(b.Records)
	if st.Profiles != n || st.ProfilesWritten != n || st.DuplicateWrites != 0 || st.JobsCreated != b.jobs() || st.Invalid != 0 {
		return fmt.Errorf("fake counters: profiles %d, written %d, duplicates %d, jobs %d (want %d profiles once in %d jobs)",
			st.Profiles, st.ProfilesWritten, st.DuplicateWrites, st.JobsCreated, n, b.jobs())
	}
	return nil
}

func (b *klaviyoBench) timed(ctx context.Context, logPath, name string, args ...string) (sample, []byte, error) {
	inner := &bench{benchParams: b.benchParams}
	return inner.timed(ctx, logPath, name, args...)
}

// baselineKlaviyoMain is the hidden `baseline-klaviyo` subcommand: it reads
// the CSV page by page and, per page, posts the job body the klaviyo
// destination sends (mapping {email, first_name, last_name}, list Bench1),
// then GETs the job until it is complete. No ledger, no lease, no cursor.
func baselineKlaviyoMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("baseline-klaviyo", pflag.ContinueOnError)
	csvPath := fs.String("csv", "", "the CSV")
	base := fs.String("url", "", "the fake's root URL")
	pageSize := fs.Int("page-size", 500, "profiles per job")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	key := os.Getenv(apiKeyEnv)
	client := &http.Client{}
	f, err := os.Open(*csvPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReaderSize(f, 64<<10))
	if _, err := cr.Read(); err != nil {
		return err
	}
	send := func(method, path string, body []byte) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(*base, "/")+path, rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Klaviyo-API-Key "+key)
		req.Header.Set("revision", klaviyoRevision)
		req.Header.Set("Accept", "application/vnd.api+json")
		if body != nil {
			req.Header.Set("Content-Type", "application/vnd.api+json")
		}
		res, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBody))
		if err != nil {
			return nil, err
		}
		if res.StatusCode/100 != 2 {
			return nil, fmt.Errorf("%s %s: HTTP %d", method, path, res.StatusCode)
		}
		return b, nil
	}
	var res baselineResult
	var items [][]byte
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		body := []byte(`{"data":{"type":"profile-bulk-import-job","attributes":{"profiles":{"data":[`)
		body = append(body, bytes.Join(items, []byte(","))...)
		body = append(body, `]}},"relationships":{"lists":{"data":[{"type":"list","id":"Bench1"}]}}}}`...)
		out, err := send(http.MethodPost, "/api/profile-bulk-import-jobs", body)
		if err != nil {
			return err
		}
		var doc struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if json.Unmarshal(out, &doc) != nil || doc.Data.ID == "" {
			return errors.New("a job without an id")
		}
		res.Requests++
		for {
			out, err := send(http.MethodGet, "/api/profile-bulk-import-jobs/"+doc.Data.ID, nil)
			if err != nil {
				return err
			}
			res.Requests++
			if bytes.Contains(out, []byte(`"status":"complete"`)) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		res.Records += int64(len(items))
		items = items[:0]
		return nil
	}
	for {
		row, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		item, _ := json.Marshal(map[string]any{"type": "profile", "attributes": map[string]any{
			"email": row[1], "first_name": row[2], "last_name": row[3]}})
		items = append(items, item)
		if len(items) == *pageSize {
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
