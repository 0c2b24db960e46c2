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
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// apiKeyEnv carries the fake's API key to both child processes (never argv).
const apiKeyEnv = "ONCESYNC_BENCH_API_KEY"

// Defaults shared by both sides, mirroring the Brevo destination's defaults
// (internal/destination/brevo) so the baseline makes the same calls the same
// way: one http.Client{} with the default transport, a 30 s per-call timeout,
// and 4 calls in flight on the single path.
const (
	defaultTimeout     = 30 * time.Second
	defaultConcurrency = 4
	maxResponseBody    = 4 << 20
)

// baselineParams configure a baseline pass.
type baselineParams struct {
	CSV         string // id,email,first_name,last_name with a header row
	BaseURL     string // e.g. http://127.0.0.1:1234/v3
	APIKey      string
	Mode        string // bulk | single
	PageSize    int
	Concurrency int // single path only
	ListIDs     []int64
	Timeout     time.Duration
	Client      *http.Client // nil = &http.Client{}
}

// baselineResult is what a pass did.
type baselineResult struct {
	Records  int64 `json:"records"`
	Requests int64 `json:"requests"`
}

// The bodies below are byte-for-byte the ones the Brevo destination sends for
// a mapping {email: email, attributes: {FIRSTNAME: first_name, LASTNAME:
// last_name}} (TestBaselineBodiesMatchOncesync checks it).

type importItem struct {
	Email      string            `json:"email,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

type importRequest struct {
	JSONBody                []importItem `json:"jsonBody"`
	ListIDs                 []int64      `json:"listIds"`
	UpdateExistingContacts  bool         `json:"updateExistingContacts"`
	EmptyContactsAttributes bool         `json:"emptyContactsAttributes"`
	DisableNotification     bool         `json:"disableNotification"`
}

type createContact struct {
	Email         string            `json:"email,omitempty"`
	Attributes    map[string]string `json:"attributes,omitempty"`
	ListIDs       []int64           `json:"listIds,omitempty"`
	UpdateEnabled bool              `json:"updateEnabled"`
}

// runBaseline streams p.CSV page by page and posts every page (bulk: one
// POST /contacts/import; single: one POST /contacts per record, at most
// p.Concurrency in flight, pages one after another). No ledger, no lease, no
// cursor.
func runBaseline(ctx context.Context, p baselineParams) (baselineResult, error) {
	if p.PageSize <= 0 {
		return baselineResult{}, fmt.Errorf("%w: page size must be positive", errUsage)
	}
	if p.Mode != "bulk" && p.Mode != "single" {
		return baselineResult{}, fmt.Errorf("%w: mode must be bulk or single, got %q", errUsage, p.Mode)
	}
	if p.Concurrency <= 0 {
		p.Concurrency = defaultConcurrency
	}
	if p.Timeout <= 0 {
		p.Timeout = defaultTimeout
	}
	client := p.Client
	if client == nil {
		client = &http.Client{}
		defer client.CloseIdleConnections()
	}
	f, err := os.Open(p.CSV)
	if err != nil {
		return baselineResult{}, err
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReaderSize(f, 64<<10))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return baselineResult{}, fmt.Errorf("read the CSV header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, c := range []string{"email", "first_name", "last_name"} {
		if _, ok := col[c]; !ok {
			return baselineResult{}, fmt.Errorf("the CSV has no %q column", c)
		}
	}
	post := poster{client: client, base: strings.TrimRight(p.BaseURL, "/"), key: p.APIKey, timeout: p.Timeout}

	var res baselineResult
	page := make([]importItem, 0, p.PageSize)
	flush := func() error {
		if len(page) == 0 {
			return nil
		}
		n, err := sendPage(ctx, post, p, page)
		res.Requests += n
		if err != nil {
			return err
		}
		res.Records += int64(len(page))
		page = page[:0]
		return nil
	}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, fmt.Errorf("read the CSV: %w", err)
		}
		page = append(page, importItem{
			Email: row[col["email"]],
			Attributes: map[string]string{
				"FIRSTNAME": row[col["first_name"]],
				"LASTNAME":  row[col["last_name"]],
			},
		})
		if len(page) == p.PageSize {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	return res, flush()
}

// sendPage posts one page and returns the number of requests made.
func sendPage(ctx context.Context, post poster, p baselineParams, page []importItem) (int64, error) {
	if p.Mode == "bulk" {
		body, err := json.Marshal(importRequest{
			JSONBody: page, ListIDs: p.ListIDs,
			UpdateExistingContacts: true, EmptyContactsAttributes: true, DisableNotification: true,
		})
		if err != nil {
			return 0, err
		}
		var out struct {
			ProcessID *int64 `json:"processId"`
		}
		if err := post.do(ctx, "/contacts/import", body, &out); err != nil {
			return 1, err
		}
		if out.ProcessID == nil {
			return 1, errors.New("POST /contacts/import: no processId in the answer")
		}
		return 1, nil
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		reqs     int64
		next     = make(chan int)
	)
	for range min(p.Concurrency, len(page)) {
		wg.Go(func() {
			for i := range next {
				body, err := json.Marshal(createContact{
					Email: page[i].Email, Attributes: page[i].Attributes,
					ListIDs: p.ListIDs, UpdateEnabled: true,
				})
				var out struct {
					ID *int64 `json:"id"`
				}
				if err == nil {
					err = post.do(ctx, "/contacts", body, &out)
				}
				mu.Lock()
				reqs++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range page {
		next <- i
	}
	close(next)
	wg.Wait()
	return reqs, firstErr
}

// poster makes one POST the way the Brevo destination does.
type poster struct {
	client  *http.Client
	base    string
	key     string
	timeout time.Duration
}

func (p poster) do(ctx context.Context, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("api-key", p.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST %s: HTTP %d", path, resp.StatusCode)
	}
	if len(b) > 0 && out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// baselineMain is the hidden `baseline` subcommand: one pass, its result as
// JSON on stdout. The API key comes from $ONCESYNC_BENCH_API_KEY.
func baselineMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("baseline", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		p       baselineParams
		listIDs []string
	)
	fs.StringVar(&p.CSV, "csv", "", "CSV file")
	fs.StringVar(&p.BaseURL, "url", "", "Brevo API root, e.g. http://127.0.0.1:8026/v3")
	fs.StringVar(&p.Mode, "mode", "bulk", "bulk or single")
	fs.IntVar(&p.PageSize, "page-size", 500, "records per page")
	fs.IntVar(&p.Concurrency, "concurrency", defaultConcurrency, "calls in flight (single)")
	fs.StringSliceVar(&listIDs, "list-ids", []string{"2"}, "Brevo list ids")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if p.CSV == "" || p.BaseURL == "" {
		return fmt.Errorf("%w: baseline needs --csv and --url", errUsage)
	}
	for _, s := range listIDs {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: bad list id %q", errUsage, s)
		}
		p.ListIDs = append(p.ListIDs, id)
	}
	p.APIKey = os.Getenv(apiKeyEnv)
	res, err := runBaseline(ctx, p)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}
