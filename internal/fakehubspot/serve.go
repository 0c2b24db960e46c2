package fakehubspot

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// shutdownGrace bounds how long Serve waits for in-flight requests.
const shutdownGrace = 5 * time.Second

// RegisterFlags registers the fake's options on fs, writing into o.
func RegisterFlags(fs *pflag.FlagSet, o *Options) {
	if o.RateLimit == 0 {
		o.RateLimit = DefaultRateLimit
	}
	fs.StringVar(&o.Token, "token", o.Token,
		"the only bearer token accepted (401 otherwise); empty accepts any non-empty token")
	fs.Func("other-token", "another token of the same account, accepted like --token (a rotation); repeatable", func(v string) error {
		o.OtherTokens = append(o.OtherTokens, v)
		return nil
	})
	fs.Int64Var(&o.PortalID, "portal-id", o.PortalID, "the account's portal id, GET /account-info/v3/details's portalId (default: one made up at start)")
	fs.IntVar(&o.RateLimit, "rate-limit", o.RateLimit,
		"requests allowed per rolling 10 s before 429 TEN_SECONDLY_ROLLING (100: Free/Starter private apps, 190: Professional/Enterprise; negative = unlimited)")
	fs.DurationVar(&o.Latency, "latency", o.Latency, "delay added to every API request, e.g. 50ms")
	fs.DurationVar(&o.WriteLatency, "write-latency", o.WriteLatency,
		"delay before each write is applied, even if its caller gave up meanwhile (a slow HubSpot), e.g. 2s")
	fs.Float64Var(&o.HoldWriteRate, "hold-write-rate", o.HoldWriteRate,
		"fraction (0..1) of writes held --hold-write before they are handled, even when the client gave up meanwhile (a write that lands after its client's timeout)")
	fs.DurationVar(&o.HoldWrite, "hold-write", o.HoldWrite, "how long a held write waits, e.g. 40s (see --hold-write-rate)")
	fs.Float64Var(&o.ErrorRate, "error-rate", o.ErrorRate, "fraction (0..1) of API requests answered --error-status before anything is applied")
	fs.IntVar(&o.ErrorStatus, "error-status", 503, "status of injected errors")
	fs.Float64Var(&o.DropResponseRate, "drop-response-rate", o.DropResponseRate,
		"fraction (0..1) of writes applied whose connection is then cut without an answer")
	fs.StringArrayVar(&o.RefuseEmails, "refuse-email", o.RefuseEmails, "e-mail address refused as invalid (repeatable)")
	fs.StringArrayVar(&o.PropertyFlags, "property", o.PropertyFlags,
		"a custom contact property NAME[:TYPE][:unique] (TYPE string, number, bool, date, datetime, enumeration; repeatable), e.g. customer_id:string:unique; "+
			"an enumeration's options as TYPE enumeration=A|B|C (a dropdown) or checkbox=A|B|C (multiple checkboxes), e.g. interests:checkbox=golf|tennis")
	fs.StringVar(&o.Standing, "standing", o.Standing,
		"the account's standing: ok, revoked (401), forbidden (403 MISSING_SCOPES) or daily (429, policy DAILY), answered to every API call; POST /_standing?state=STATE changes it while the fake runs")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed for fault injection (0 = random)")
}

// ParseProperty reads NAME[:TYPE][:unique], where TYPE may be
// enumeration=A|B|C or checkbox=A|B|C (an enumeration with those options,
// shown as a dropdown or as multiple checkboxes).
func ParseProperty(s string) (Property, error) {
	parts := strings.Split(s, ":")
	p := Property{Name: strings.ToLower(strings.TrimSpace(parts[0])), Type: "string"}
	if p.Name == "" {
		return p, fmt.Errorf("fakehubspot: property %q has no name", s)
	}
	for _, x := range parts[1:] {
		if field, opts, ok := strings.Cut(x, "="); ok && (field == "enumeration" || field == "checkbox") {
			p.Type, p.FieldType, p.Options = "enumeration", "select", strings.Split(opts, "|")
			if field == "checkbox" {
				p.FieldType = "checkbox"
			}
			if slices.Contains(p.Options, "") || slices.ContainsFunc(p.Options, func(o string) bool { return strings.Contains(o, ";") }) {
				return p, fmt.Errorf("fakehubspot: property %q: an option is empty or holds \";\"", s)
			}
			continue
		}
		switch x {
		case "unique":
			p.Unique = true
		case "string", "number", "bool", "date", "datetime", "enumeration":
			p.Type = x
		default:
			return p, fmt.Errorf("fakehubspot: property %q: unknown type or flag %q", s, x)
		}
	}
	return p, nil
}

// Serve runs a fake configured by opts on addr until ctx is cancelled.
// ready, when non-nil, is called with the listening address.
func Serve(ctx context.Context, addr string, opts Options, ready func(addr string)) error {
	if math.IsNaN(opts.HoldWriteRate) || opts.HoldWriteRate < 0 || opts.HoldWriteRate > 1 || opts.HoldWrite < 0 {
		return fmt.Errorf("fakehubspot: --hold-write-rate must be between 0 and 1 and --hold-write not negative")
	}
	if _, err := checkStanding(opts.Standing); err != nil {
		return err
	}
	for _, c := range opts.PropertyFlags {
		p, err := ParseProperty(c)
		if err != nil {
			return err
		}
		opts.Properties = append(opts.Properties, p)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("fakehubspot: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: New(opts), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("fakehubspot: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("fakehubspot: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("fakehubspot: serve: %w", err)
	}
	return nil
}
