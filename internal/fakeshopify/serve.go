package fakeshopify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
)

const shutdownGrace = 5 * time.Second

// RegisterFlags registers the fake's options on fs, writing into o; the
// defaults are o's current values. seed, when non-nil, receives
// --customers (customers generated at start).
func RegisterFlags(fs *pflag.FlagSet, o *Options, seed *int) {
	fs.StringVar(&o.Token, "token", o.Token,
		"the only X-Shopify-Access-Token accepted (401 otherwise); empty accepts any non-empty token")
	fs.IntVar(&o.BucketSize, "bucket", o.BucketSize, "cost throttle bucket size in points (0 = 1000)")
	fs.IntVar(&o.RestoreRate, "restore-rate", o.RestoreRate, "cost throttle restore rate in points per second (0 = 50)")
	fs.DurationVar(&o.Latency, "latency", o.Latency, "delay added to every API request, e.g. 50ms")
	fs.Float64Var(&o.ErrorRate, "error-rate", o.ErrorRate, "fraction (0..1) of API requests answered 500, 502, 503 or 504")
	fs.Float64Var(&o.RateLimitRate, "rate-limit-rate", o.RateLimitRate, "fraction (0..1) of API requests answered 429 with Retry-After")
	fs.DurationVar(&o.RetryAfter, "retry-after", o.RetryAfter, "the Retry-After of those 429s (0 = 1s)")
	fs.Float64Var(&o.DropRate, "drop-rate", o.DropRate, "fraction (0..1) of API requests whose connection is cut before any answer")
	fs.Float64Var(&o.CutRate, "cut-rate", o.CutRate, "fraction (0..1) of API requests served (and charged) whose answer is cut halfway through its body")
	fs.StringVar(&o.RedirectTo, "redirect-to", o.RedirectTo, "answer every API request 301 to this origin (a moved shop)")
	fs.DurationVar(&o.IndexLag, "index-lag", o.IndexLag, "how long after an update a customer shows up in filtered (query:) searches, e.g. 2s")
	fs.DurationVar(&o.SearchGranularity, "search-granularity", o.SearchGranularity,
		"how finely updated_at/created_at search filters compare times: 0 = a whole day, as Shopify documents them; 1s = to the second")
	fs.StringVar(&o.OldestVersion, "oldest-version", o.OldestVersion, "the oldest supported API version, e.g. 2026-01: older ones are served as it, as Shopify falls forward (empty serves every version as asked)")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed for fault injection (0 = random)")
	if seed != nil {
		fs.IntVar(seed, "customers", *seed, "customers to generate at start (POST /_customers adds and changes more)")
	}
}

// Serve runs s on addr (":0" picks a free port) until ctx is cancelled;
// ready, when non-nil, gets the listening address.
func (s *Server) Serve(ctx context.Context, addr string, ready func(addr string)) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("fakeshopify: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("fakeshopify: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("fakeshopify: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("fakeshopify: serve: %w", err)
	}
	return nil
}
