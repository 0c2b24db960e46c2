package fakeklaviyo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
)

// DefaultJobDelay is the default of --job-delay: jobs are asynchronous, as
// Klaviyo's are, and short enough for demos.
const DefaultJobDelay = 50 * time.Millisecond

// RegisterFlags registers the fake's options on fs, writing into o. Request
// validation and rate limits are on by default; --job-delay and
// --unsubscribe-delay default to DefaultJobDelay.
func RegisterFlags(fs *pflag.FlagSet, o *Options) {
	if o.JobDelay == 0 {
		o.JobDelay = DefaultJobDelay
	}
	if o.UnsubscribeDelay == 0 {
		o.UnsubscribeDelay = DefaultJobDelay
	}
	fs.StringVar(&o.APIKey, "api-key", o.APIKey, "the only private API key accepted (401 otherwise); empty accepts any")
	fs.Func("other-api-key", "another private key of the same account, accepted like --api-key (a rotation); repeatable", func(v string) error {
		o.OtherAPIKeys = append(o.OtherAPIKeys, v)
		return nil
	})
	fs.StringVar(&o.AccountID, "account-id", o.AccountID, "the account's id, GET /api/accounts (default: one made up at start)")
	fs.BoolVar(&o.NoAccountsScope, "no-accounts-scope", o.NoAccountsScope, "answer GET /api/accounts 403 permission_denied, as for a key without the accounts:read scope")
	fs.BoolVar(&o.Validate, "validate", true, "check every /api request against Klaviyo's API spec (400 when it does not conform)")
	fs.BoolVar(&o.EnforceRateLimits, "rate-limits", true, "enforce Klaviyo's documented per-endpoint burst and steady limits per account (429 with Retry-After)")
	fs.DurationVar(&o.Latency, "latency", o.Latency, "delay added to every /api request, e.g. 50ms")
	fs.DurationVar(&o.WriteLatency, "write-latency", o.WriteLatency, "delay between applying a write and answering it")
	fs.Float64Var(&o.HoldWriteRate, "hold-write-rate", o.HoldWriteRate, "fraction (0..1) of writes held --hold-write before they are handled, even when the client gave up meanwhile")
	fs.DurationVar(&o.HoldWrite, "hold-write", o.HoldWrite, "how long a held write waits, e.g. 40s (see --hold-write-rate)")
	fs.Float64Var(&o.ErrorRate, "error-rate", o.ErrorRate, "fraction (0..1) of /api requests answered 503")
	fs.Float64Var(&o.RateLimitRate, "rate-limit-rate", o.RateLimitRate, "fraction (0..1) of /api requests answered 429")
	fs.Float64Var(&o.ErrorAfterWriteRate, "error-after-write-rate", o.ErrorAfterWriteRate, "fraction (0..1) of writes applied and then answered 500")
	fs.Float64Var(&o.DropResponseRate, "drop-response-rate", o.DropResponseRate, "fraction (0..1) of writes applied whose connection is then cut")
	fs.StringArrayVar(&o.RefuseEmails, "refuse-email", o.RefuseEmails, "e-mail address refused (400 on single writes, an import error in bulk jobs); repeatable")
	fs.StringArrayVar(&o.Lists, "list", o.Lists, "a list id of the account (repeatable; none given: every id exists)")
	fs.DurationVar(&o.JobDelay, "job-delay", o.JobDelay, "how long a bulk import job runs before it is applied (0 = before the 202)")
	fs.Float64Var(&o.JobSkipRate, "job-skip-rate", o.JobSkipRate, "fraction (0..1) of a job's valid profiles it refuses (import errors)")
	fs.Float64Var(&o.JobFailRate, "job-fail-rate", o.JobFailRate, "fraction (0..1) of jobs that fail whole (cancelled, nothing applied unless --job-fail-applies)")
	fs.Float64Var(&o.JobFailApplies, "job-fail-applies", o.JobFailApplies, "fraction (0..1) of a failing job's profiles applied before it is cancelled (counted in completed_count)")
	fs.IntVar(&o.JobFailFirst, "job-fail-first", o.JobFailFirst, "the first N jobs fail whole (cancelled, as --job-fail-rate)")
	fs.BoolVar(&o.OmitErrorPayload, "omit-error-payload", o.OmitErrorPayload, "leave import errors' original_payload null (only the JSON pointer names the profile)")
	fs.DurationVar(&o.ErrorsListedAfter, "errors-listed-after", o.ErrorsListedAfter, "list a job's import errors only this long after it ended (failed_count counts them at once)")
	fs.BoolVar(&o.ErrorsNeverListed, "errors-never-listed", o.ErrorsNeverListed, "never list a job's import errors (failed_count still counts them)")
	fs.Float64Var(&o.JobRefuseRate, "job-refuse-rate", o.JobRefuseRate, "fraction (0..1) of bulk import job requests refused whole with 400 (the client falls back to one profile import per record)")
	fs.DurationVar(&o.UnsubscribeDelay, "unsubscribe-delay", o.UnsubscribeDelay, "how long an unsubscribe job waits before it is applied (0 = before the 202); one that then finds a profile out of the list unsubscribes it globally")
	fs.StringVar(&o.Standing, "standing", o.Standing, "the account's standing: ok, revoked (401 authentication_failed) or forbidden (403 permission_denied), answered to every /api call; POST /_standing?state=STATE changes it while the fake runs")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed for fault injection (0 = random)")
}

// Serve runs a fake Klaviyo on addr until ctx is cancelled. ready, when
// non-nil, is called with the listening address.
func Serve(ctx context.Context, addr string, opts Options, ready func(addr string)) error {
	if err := opts.Check(); err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("fakeklaviyo: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: New(opts), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("fakeklaviyo: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
		return fmt.Errorf("fakeklaviyo: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("fakeklaviyo: serve: %w", err)
	}
	return nil
}
