package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/fakeshopify"
)

// shopifyTokenEnv carries the fake Shopify's token to oncesync, as a real
// token would be.
const shopifyTokenEnv = "ONCESYNC_BENCH_SHOPIFY_TOKEN"

// shopifyMain is `oncesync-bench shopify`: oncesync run reading N customers
// from an in-process fake Shopify into the fake Brevo (bulk path), then an
// incremental run with nothing changed. The fake's cost throttle is set out
// of reach (its bucket is huge): a real shop's restore rate bounds the rate
// far below oncesync's (docs/PERFORMANCE.md says by how much), and this
// measures oncesync.
func shopifyMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("oncesync-bench shopify", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var p benchParams
	fs.IntVar(&p.Records, "records", 200_000, "customers at the fake Shopify")
	fs.IntVar(&p.PageSize, "page-size", 250, "source.page_size (at most 250)")
	fs.IntVar(&p.Runs, "runs", 3, "measurements; the median and spread are reported")
	fs.StringVar(&p.Bin, "bin", "bin/oncesync", "the oncesync binary")
	fs.StringVar(&p.Dir, "dir", "", "where the work dir is created (default: the system temp dir)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if p.Records <= 0 || p.Runs <= 0 || p.PageSize < 1 || p.PageSize > 250 {
		return fmt.Errorf("%w: --records and --runs must be positive, --page-size 1 to 250", errUsage)
	}
	p.Mode = "bulk"
	b := &bench{benchParams: p, log: stderr}
	var err error
	if b.bin, err = filepath.Abs(p.Bin); err != nil {
		return err
	}
	if _, err := os.Stat(b.bin); err != nil {
		return fmt.Errorf("%w: the oncesync binary %s is missing", errUsage, p.Bin)
	}
	if b.work, err = os.MkdirTemp(p.Dir, "oncesync-bench-shopify-*"); err != nil {
		return err
	}
	defer os.RemoveAll(b.work)

	const token = "shpat_bench"
	shop := fakeshopify.New(fakeshopify.Options{Token: token, BucketSize: 1 << 30, RestoreRate: 1 << 30})
	// Customers updated over the last days, one a second, as a shop's are
	// (not all in one instant).
	start := time.Now().UTC().Add(-time.Duration(p.Records+1) * time.Second)
	cs := make([]fakeshopify.Customer, p.Records)
	for i := range cs {
		at := start.Add(time.Duration(i) * time.Second)
		cs[i] = fakeshopify.Customer{ID: int64(7_000_000_000_001 + i), Email: fmt.Sprintf("customer%07d@example.com", i+1),
			FirstName: fmt.Sprintf("First%d", i+1), LastName: "Last", Tags: []string{"bench"}, CreatedAt: at, UpdatedAt: at}
	}
	shop.Put(cs...)
	b.fake = fakebrevo.New(fakebrevo.Options{APIKey: benchAPIKey})
	shopURL, stopShop, err := serveLocal(shop)
	if err != nil {
		return err
	}
	defer stopShop()
	brevoURL, stopBrevo, err := serveLocal(b.fake)
	if err != nil {
		return err
	}
	defer stopBrevo()
	b.baseURL = brevoURL + "/v3"
	if err := os.Setenv(shopifyTokenEnv, token); err != nil {
		return err
	}

	var once, incr []sample
	for i := 1; i <= p.Runs; i++ {
		dir := filepath.Join(b.work, fmt.Sprintf("run-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		cfg := filepath.Join(dir, "oncesync.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`store: sqlite://%s
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: %s
    workspace: bench
    source: {type: shopify, shop_url: "%s", access_token: "${%s}", page_size: %d}
    destination: {type: brevo, base_url: %s, api_key: ${%s}, mode: bulk, list_ids: [2], rate_limit: 1000000}
    mapping: {email: email, attributes: {FIRSTNAME: firstName, LASTNAME: lastName}}
`, filepath.Join(dir, "oncesync.db"), syncID, shopURL, shopifyTokenEnv, p.PageSize, b.baseURL, apiKeyEnv)), 0o600); err != nil {
			return err
		}
		b.fake.Reset()
		fmt.Fprintf(stderr, "run %d/%d: oncesync ...", i, p.Runs)
		s, out, err := b.timed(ctx, filepath.Join(dir, "run.log"), b.bin, "run", "--config", cfg, syncID)
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
		if err := b.checkFull(b.fake.Stats()); err != nil {
			return err
		}
		once = append(once, s)
		fmt.Fprintf(stderr, " %.0f records/s;", s.RecordsPerSec)
		// The incremental run: nothing changed, nothing (or the last
		// instant's few customers) read, nothing sent.
		before := b.fake.Stats().Requests
		s, out, err = b.timed(ctx, filepath.Join(dir, "incremental.log"), b.bin, "run", "--config", cfg, syncID)
		if err != nil {
			return err
		}
		if sum, err = parseSummary(out); err != nil {
			return err
		}
		if sent := b.fake.Stats().Requests - before; sum.state != "succeeded" || sum.written != 0 || sent != 0 {
			return fmt.Errorf("incremental run: %q, %d requests; want nothing written or sent", sum.line, sent)
		}
		incr = append(incr, s)
		fmt.Fprintf(stderr, " incremental run %s (read %d)\n", s.Wall.Round(time.Millisecond), sum.read)
	}
	o, in := summarize(once), summarize(incr)
	fmt.Fprintf(stdout, "oncesync-bench shopify: %d customers, pages of %d, bulk path, %d runs (median [min-max])\n", p.Records, p.PageSize, p.Runs)
	fmt.Fprintf(stdout, "fake Shopify -> fake Brevo: %s records/s, cpu %.2fs per run; incremental run without changes: %s wall (median)\n",
		rateSpread(o), o.CPUSecs, time.Duration(median(walls(in.Samples))).Round(time.Millisecond))
	fmt.Fprintf(stdout, "fake Shopify: %d requests, cost charged %d points over all runs\n", shop.Stats().Requests, shop.Stats().CostCharged)
	return nil
}

func walls(ss []sample) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = float64(s.Wall)
	}
	return out
}

// serveLocal serves h on a loopback port.
func serveLocal(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}
