package fakebrevo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// shutdownGrace bounds how long Serve waits for in-flight requests on
// shutdown.
const shutdownGrace = 5 * time.Second

// DefaultRateLimitPerSecond is Brevo's default limit on the contacts
// endpoints, the default of --rate-limit.
const DefaultRateLimitPerSecond = 10

// DefaultProcessDelay is the default of --process-delay: imports are
// asynchronous, as Brevo's are (the 202 comes before the contacts exist),
// and short enough for demos.
const DefaultProcessDelay = 20 * time.Millisecond

// RegisterFlags registers the fake's options on fs, writing into o. The
// defaults are o's current values, except --rate-limit, which defaults to
// Brevo's 10 requests per second when o.RateLimitPerSecond is 0, and
// --process-delay, which defaults to DefaultProcessDelay when
// o.ProcessDelay is 0.
func RegisterFlags(fs *pflag.FlagSet, o *Options) {
	if o.RateLimitPerSecond == 0 {
		o.RateLimitPerSecond = DefaultRateLimitPerSecond
	}
	if o.ProcessDelay == 0 {
		o.ProcessDelay = DefaultProcessDelay
	}
	fs.StringVar(&o.APIKey, "api-key", o.APIKey,
		"the only api-key header value accepted (401 otherwise); empty accepts any non-empty key")
	fs.Func("other-api-key", "another key of the same account, accepted like --api-key (a key rotation); repeatable", func(v string) error {
		o.OtherAPIKeys = append(o.OtherAPIKeys, v)
		return nil
	})
	fs.StringVar(&o.AccountLogin, "account-login", o.AccountLogin,
		"the account's login e-mail, GET /v3/account's email (default: one made up at start, so that two fakes are two accounts)")
	fs.DurationVar(&o.Latency, "latency", o.Latency,
		"delay added to every /v3 request, e.g. 50ms")
	fs.Float64Var(&o.ErrorRate, "error-rate", o.ErrorRate,
		"fraction (0..1) of /v3 requests answered 503")
	fs.Float64Var(&o.RateLimitRate, "rate-limit-rate", o.RateLimitRate,
		"fraction (0..1) of /v3 requests answered 429 too_many_requests, on top of --rate-limit")
	fs.IntVar(&o.RateLimitPerSecond, "rate-limit", o.RateLimitPerSecond,
		"requests per second allowed on /v3/contacts* before 429 (0 = unlimited)")
	fs.BoolVar(&o.SlidingRateWindow, "sliding-rate-window", o.SlidingRateWindow,
		"count --rate-limit over the second before each request, not per calendar second (the stricter reading of Brevo's per-second limit)")
	fs.IntVar(&o.OtherRateLimitPerHour, "other-rate-limit", o.OtherRateLimitPerHour,
		"requests per hour allowed on the /v3 routes outside /v3/contacts* (/v3/account, /v3/processes) before 429, as Brevo's general tier allows 100 (0 = unlimited)")
	fs.Float64Var(&o.DropResponseRate, "drop-response-rate", o.DropResponseRate,
		"fraction (0..1) of write requests whose write is applied and whose connection is then cut without a response")
	fs.Float64Var(&o.HoldWriteRate, "hold-write-rate", o.HoldWriteRate,
		"fraction (0..1) of write requests held --hold-write before they are handled, even when the client gave up meanwhile (a write that lands after its client's timeout)")
	fs.DurationVar(&o.HoldWrite, "hold-write", o.HoldWrite,
		"how long a held write waits, e.g. 40s (see --hold-write-rate)")
	fs.StringArrayVar(&o.RefuseEmails, "refuse-email", o.RefuseEmails,
		"e-mail address refused with 400 invalid_parameter by POST/PUT /v3/contacts (repeatable); an import row with it is skipped and listed in the import's invalid_emails report")
	fs.StringVar(&o.ConflictAnswer, "conflict-answer", o.ConflictAnswer,
		"how an identifier conflict (an e-mail, ext_id or SMS number another contact holds) is answered, as Brevo has: empty for duplicate_parameter with metadata.duplicate_identifiers, invalid_parameter for the same with that code, legacy for \"Contact already exist\" without metadata")
	if o.Attributes == nil {
		o.AnyAttribute = true // until --attribute models an account
	}
	fs.Var(attributesFlag{o}, "attribute",
		"model the account's contact attributes: "+defaultNames()+" and this one, NAME or NAME:TYPE with TYPE one of "+strings.Join(attributeTypes, ", ")+", or NAME:category=LABEL|LABEL... for a category attribute whose options are numbered from 1 (repeatable, or comma-separated); a write's other attributes, and values not of an attribute's type, are then dropped, as Brevo drops them. Without it, every attribute is stored and none listed")
	fs.DurationVar(&o.ProcessDelay, "process-delay", o.ProcessDelay,
		"how long an import stays queued/in_process before its contacts are written (0 = before the 202)")
	fs.DurationVar(&o.ImportRowDelay, "import-row-delay", o.ImportRowDelay,
		"added to --process-delay per row of an import, so a large import runs long, e.g. 1ms")
	fs.Float64Var(&o.ImportSkipRate, "import-skip-rate", o.ImportSkipRate,
		"fraction (0..1) of an import's valid rows its process skips, listed in the invalid_emails report")
	fs.Float64Var(&o.ImportFailRate, "import-fail-rate", o.ImportFailRate,
		"fraction (0..1) of import processes that fail whole (status failed, nothing applied)")
	fs.StringVar(&o.ReportListen, "report-listen", o.ReportListen,
		"serve import reports on this second address (another origin, as Brevo's file storage is); empty serves them on --listen under /_reports")
	fs.BoolVar(&o.Validate, "validate", o.Validate,
		"check every /v3 request against Brevo's API spec and answer 400 invalid_parameter when it does not conform")
	fs.StringVar(&o.Standing, "standing", o.Standing,
		"the account's standing: ok, revoked (401), no-credits (402 not_enough_credits), forbidden (403 permission_denied) or unvalidated (403 account_under_validation), answered to every /v3 call; POST /_standing?state=STATE changes it while the fake runs (a key revoked mid-run, then restored)")
	fs.Int64Var(&o.Seed, "seed", o.Seed,
		"seed for fault injection, for reproducible runs (0 = random)")
}

// Serve runs a fake Brevo configured by opts on addr (":0" picks a free
// port) until ctx is cancelled, then shuts down gracefully. ready, when
// non-nil, is called with the listening address once requests are accepted.
//
// With opts.ReportListen set, import reports are served on that address too
// (and their URLs point there).
func Serve(ctx context.Context, addr string, opts Options, ready func(addr string)) error {
	if err := opts.Check(); err != nil {
		return err
	}
	if opts.ReportListen == "" {
		return New(opts).Serve(ctx, addr, ready)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", opts.ReportListen)
	if err != nil {
		return fmt.Errorf("fakebrevo: listen on %s: %w", opts.ReportListen, err)
	}
	opts.ReportBaseURL = "http://" + ln.Addr().String() + ReportPath
	s := New(opts)
	rs := &http.Server{Handler: s.Reports(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rs.Serve(ln) }()
	defer rs.Close()
	return s.Serve(ctx, addr, ready)
}

// Serve runs s on addr until ctx is cancelled (see the package-level Serve).
func (s *Server) Serve(ctx context.Context, addr string, ready func(addr string)) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("fakebrevo: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("fakebrevo: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("fakebrevo: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("fakebrevo: serve: %w", err)
	}
	return nil
}

// attributesFlag is --attribute: each NAME[:TYPE] adds an attribute of the
// normal category (text unless TYPE says date, float, boolean or id) to the
// account's (DefaultAttributes to start with), and the fake then keeps only
// the account's attributes, and of each only values of its type.
type attributesFlag struct{ o *Options }

func (f attributesFlag) String() string {
	if f.o == nil {
		return ""
	}
	var names []string
	for _, a := range f.o.Attributes[min(len(DefaultAttributes), len(f.o.Attributes)):] {
		n := a.Name
		switch {
		case a.Category == "category":
			labels := make([]string, len(a.Enumeration))
			for i, o := range a.Enumeration {
				labels[i] = o.Label
			}
			n += ":category=" + strings.Join(labels, "|")
		case a.Type != "text":
			n += ":" + a.Type
		}
		names = append(names, n)
	}
	return strings.Join(names, ",")
}

func (f attributesFlag) Set(v string) error {
	for _, spec := range strings.Split(v, ",") {
		name, typ, typed := strings.Cut(strings.TrimSpace(spec), ":")
		if name == "" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			return fmt.Errorf("attribute %q: want letters, digits and underscores", name)
		}
		if labels, ok := strings.CutPrefix(typ, "category="); ok {
			if labels == "" {
				return fmt.Errorf("attribute %q: want NAME:category=LABEL|LABEL...", spec)
			}
			if f.o.Attributes == nil {
				f.o.Attributes = WithAttributes()
			}
			f.o.AnyAttribute = false
			f.o.Attributes = append(f.o.Attributes, CategoryAttribute(name, strings.Split(labels, "|")...))
			continue
		}
		if typed && !slices.Contains(attributeTypes, typ) {
			return fmt.Errorf("attribute %q: type %q is not one of %s, nor category=LABEL|LABEL...", name, typ, strings.Join(attributeTypes, ", "))
		}
		if f.o.Attributes == nil {
			f.o.Attributes = WithAttributes()
		}
		f.o.AnyAttribute = false
		a := textAttribute(name)
		if typed {
			a.Type = typ
		}
		f.o.Attributes = append(f.o.Attributes, a)
	}
	return nil
}

func (attributesFlag) Type() string { return "name[:type]" }

func defaultNames() string {
	names := make([]string, len(DefaultAttributes))
	for i, a := range DefaultAttributes {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}
