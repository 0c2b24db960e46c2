package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// accountsMain is `oncesync-bench accounts`: several syncs writing to one
// Brevo account over serve and workers (PostgreSQL store, Redis), against a
// fake that allows the account --rate requests/s on /v3/contacts and
// answers 429 past it (docs/guide.md#one-rate-limit-per-account). It
// prints the share of requests answered 429 and how much of the account's
// budget the syncs used.
func accountsMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("accounts", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bin     = fs.String("oncesync", "bin/oncesync", "the oncesync binary")
		syncs   = fs.Int("syncs", 4, "syncs writing to the one account")
		workers = fs.Int("workers", 2, "`oncesync worker` processes beside serve")
		records = fs.Int("records", 100, "records per sync (single path: one request each)")
		rate    = fs.Int("rate", 10, "the account's requests per second at the fake")
		sliding = fs.Bool("sliding-window", true, "the fake counts --rate over the second before each request (fakebrevo.Options.SlidingRateWindow), not per calendar second")
		dbURL   = fs.String("database-url", envOr("ONCESYNC_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL server")
		rdURL   = fs.String("redis-url", envOr("ONCESYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis")
		timeout = fs.Duration("timeout", 5*time.Minute, "give up after")
	)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "oncesync-bench-accounts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, drop, err := benchDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer drop()

	fake := fakebrevo.New(fakebrevo.Options{APIKey: benchAPIKey, RateLimitPerSecond: *rate, SlidingRateWindow: *sliding})
	var (
		mu          sync.Mutex
		first, last time.Time
		ok, limited int64
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		fake.ServeHTTP(rec, r)
		if !strings.HasPrefix(r.URL.Path, "/v3/contacts") {
			return
		}
		now := time.Now()
		mu.Lock()
		if first.IsZero() {
			first = now
		}
		last = now
		switch {
		case rec.status == http.StatusTooManyRequests:
			limited++
		case rec.status < 300:
			ok++
		}
		mu.Unlock()
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fakeURL := "http://" + ln.Addr().String()

	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	apiAddr := apiLn.Addr().String()
	apiLn.Close()
	const token = "bench-api-token-0123456789abcdef"
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "store: %s\nredis: %s\nweb: {listen: %s, api_tokens: [%s]}\nsyncs:\n", db, *rdURL, apiAddr, token)
	for i := 1; i <= *syncs; i++ {
		csv := filepath.Join(dir, fmt.Sprintf("s%d.csv", i))
		var b bytes.Buffer
		b.WriteString("id,email,first_name\n")
		for j := 1; j <= *records; j++ {
			fmt.Fprintf(&b, "%d,s%d-c%06d@example.com,N%d\n", j, i, j, j)
		}
		if err := os.WriteFile(csv, b.Bytes(), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(&cfg, `  - id: s%d
    source: {type: csv, path: %s, identity: id, page_size: 50}
    destination: {type: brevo, base_url: %s/v3, api_key: ${%s}, mode: single, concurrency: 4}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`, i, csv, fakeURL, apiKeyEnv)
	}
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return err
	}
	ids := make([]string, *syncs)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i+1)
	}
	if err := forgetStoredFences(ctx, *rdURL, ids...); err != nil {
		return err
	}

	procs := []*child{}
	defer func() {
		for _, c := range procs {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range procs {
			_, _ = c.wait()
		}
	}()
	serve, err := startChild(ctx, filepath.Join(dir, "serve.log"), []string{*bin, "serve", "--config", cfgPath})
	if err != nil {
		return err
	}
	procs = append(procs, serve)
	api := "http://" + apiAddr
	// Workers start once serve has migrated the fresh database.
	if err := waitHTTP(ctx, api+"/healthz"); err != nil {
		return fmt.Errorf("serve did not come up: %w\n%s", err, tail(serve.out.Bytes(), 2000))
	}
	for i := range *workers {
		w, err := startChild(ctx, filepath.Join(dir, fmt.Sprintf("worker%d.log", i+1)), []string{*bin, "worker", "--config", cfgPath})
		if err != nil {
			return err
		}
		procs = append(procs, w)
	}
	for i := 1; i <= *syncs; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1/syncs/s%d/run", api, i), strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("run now of s%d: %s", i, resp.Status)
		}
	}
	want := int64(*syncs * *records)
	for fake.Stats().Contacts < want {
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d contacts written before the timeout", fake.Stats().Contacts, want)
		case <-time.After(200 * time.Millisecond):
		}
	}
	st := fake.Stats()
	mu.Lock()
	span := last.Sub(first)
	okN, limitedN := ok, limited
	mu.Unlock()
	total := okN + limitedN
	share := float64(limitedN) / float64(max(total, 1))
	used := float64(okN) / (float64(*rate) * max(span.Seconds(), 1e-9))
	window := "calendar seconds"
	if *sliding {
		window = "the second before each request"
	}
	fmt.Fprintf(stdout, "%d syncs on one Brevo account over serve + %d workers, %d records each (single path), fake allows %d req/s over %s\n",
		*syncs, *workers, *records, *rate, window)
	fmt.Fprintf(stdout, "  requests to /v3/contacts  %d (%d answered 429)\n", total, limitedN)
	fmt.Fprintf(stdout, "  429 share                 %.1f %%   (goal <= 5 %%)\n", 100*share)
	fmt.Fprintf(stdout, "  account budget used       %.1f %%   (%d requests in %.1f s at %d/s; goal >= 90 %%)\n", 100*used, okN, span.Seconds(), *rate)
	fmt.Fprintf(stdout, "  contacts %d, duplicate writes %d\n", st.Contacts, st.DuplicateWrites)
	if st.DuplicateWrites != 0 {
		return fmt.Errorf("%d duplicate writes", st.DuplicateWrites)
	}
	return nil
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush and Hijack pass through (the fake may cut connections).
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("not a hijacker")
	}
	return h.Hijack()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// benchDatabase creates a fresh database on serverURL; drop removes it.
func benchDatabase(ctx context.Context, serverURL string) (dbURL string, drop func(), err error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "bench_accounts_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL at --database-url: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, serverURL); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(ctx)
		}
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		drop()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

func waitHTTP(ctx context.Context, u string) error {
	for {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
