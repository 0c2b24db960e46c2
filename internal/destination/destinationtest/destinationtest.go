// Package destinationtest is the acceptance suite every destination passes
// (modelled on Conduit's connector acceptance tests). A destination's tests
// call Run with a Harness that starts its server (a fake or an httptest
// server) with the faults the suite asks for. Besides writes, refusals,
// retries and cancellation, it holds every destination to the transport's
// rules: a redirect is never followed (nothing reaches the other origin), a
// request that never reached the server is NotSent rather than in doubt, and
// no attempt or wait outlives the attempt deadline (docs/guide.md#the-ledger-and-its-retention, docs/guide.md#the-store-and-the-leases, docs/guide.md#the-sync-pages-and-the-api). A
// destination whose writes may be Accepted (asynchronous imports) declares
// Harness.Async: the suite then settles its writes through
// destination.Async.Outcomes and checks the processes' outcomes too.
package destinationtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Faults are the ways the suite makes a destination's server misbehave.
type Faults struct {
	// Refuse are records the server refuses for their content (a 4xx for
	// that record); every other record is accepted.
	Refuse []destination.Record
	// Unauthorized: the server refuses the destination's credentials (401).
	Unauthorized bool
	// Flaky: the server answers 5xx to a good share of requests (a fraction
	// or every other one) and accepts the rest.
	Flaky bool
	// Unavailable: the server answers 5xx to every request.
	Unavailable bool
	// RedirectTo, when set, is another origin: the server answers every
	// request 307 with a Location there (same path).
	RedirectTo string
	// Refused: nothing listens at the destination's address; every
	// connection is refused.
	Refused bool
	// RateLimited, when positive, makes the server answer every request 429,
	// asking to wait that long (Retry-After, or the destination's own reset
	// header).
	RateLimited time.Duration
	// FailProcess: the server accepts writes for asynchronous processing,
	// then fails every process whole, applying nothing of it (Async
	// harnesses only).
	FailProcess bool
	// DropAnswers, when positive, makes the server apply the first
	// DropAnswers writes and then cut their connections before answering
	// (applied but unanswered). Only asked of harnesses whose Target has
	// Duplicates.
	DropAnswers int
	// RateLimitStorm, when positive, makes the server answer its first
	// RateLimitStorm requests 429, asking for a short wait, and serve the
	// rest normally (a storm that ends).
	RateLimitStorm int
}

// Config is what the suite asks of one Setup.
type Config struct {
	Faults Faults
	// Sleep must be the destination's Sleep (the suite controls waiting).
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRetries must be the destination's MaxRetries.
	MaxRetries int
	// Clock must be the destination's Clock (attempt deadlines are read
	// against it). It starts at the wall time and moves only when the suite
	// advances it.
	Clock *clock.Fake
	// WriteMode is the write mode the destination must be configured with
	// ("" is upsert); only modes the Harness lists in WriteModes are asked.
	WriteMode destination.WriteMode
}

// Target is a destination wired to a server started for one test.
type Target struct {
	Dest destination.Destination
	// Secrets are strings that must never appear in an error (API keys,
	// header values, signing secrets).
	Secrets []string
	// Requests reports how many requests the server received so far.
	Requests func() int64
	// ServerErrors reports how many 5xx answers the server sent so far.
	ServerErrors func() int64
	// Stored reports how many distinct records the server holds.
	Stored func() int64
	// Advance, when set, moves the server's asynchronous processing forward
	// (e.g. a fake clock past the import delay); the suite calls it between
	// two polls of Outcomes. With Advance set, no process may end before the
	// first Advance: the suite checks that Outcomes first says not done.
	Advance func()
	// Duplicates, when set, reports how many writes the server applied to a
	// record that already held exactly the data written (a duplicate
	// write). With it set the suite runs the lost-answer case and checks
	// that no case writes a record twice.
	Duplicates func() int64
	// Put, when set, stores rec at the server as if a person or an earlier
	// tool had written it (it counts as no write); the write-mode cases
	// need it.
	Put func(rec destination.Record)
	// Lookup, when set, reports whether the server holds a record with
	// rec's identity (present) and whether it holds exactly rec's data
	// (same); the write-mode cases need it.
	Lookup func(rec destination.Record) (present, same bool)
}

// Harness adapts one destination to the suite.
type Harness struct {
	// Setup starts a fresh server with cfg.Faults and returns a destination
	// writing to it; it registers its own cleanup with t.Cleanup.
	Setup func(t *testing.T, cfg Config) Target
	// Record returns the i-th test record; nil means Record (the package
	// function), whose data has the Brevo shape.
	Record func(i int) destination.Record
	// Async: the destination's writes may answer Accepted (an asynchronous
	// import) and it implements destination.Async. The suite settles every
	// Accepted result by polling Outcomes until done and checks what the
	// process did: Delivered, Rejected for the rows it refused, NotSent for
	// every record of a process that failed. Without Async, a Write that
	// answers Accepted fails the suite.
	Async bool
	// Storms: the harness's server honours Faults.RateLimitStorm; the suite
	// then checks that a 429 storm that ends delivers every record once.
	Storms bool
	// LostAnswers: the harness's server honours Faults.DropAnswers and its
	// Target counts Duplicates; the suite then checks that a write whose
	// answer was lost is left in doubt and is settled without a second
	// write.
	LostAnswers bool
	// WriteModes are the write modes beyond upsert the destination
	// supports; the suite runs a case for each (update skips a missing
	// record, create skips an existing one, mirror's Remover removes
	// idempotently). They need Changed and the Target's Put and Lookup.
	WriteModes []destination.WriteMode
	// Changed returns record i with the same identity at the destination
	// (e-mail, id property) and other data (write-mode cases).
	Changed func(i int) destination.Record
	// Cleared returns record i with the same identity and a mapped field
	// empty ("" for even i, null for odd i): the suite writes record i,
	// then Cleared(i), and checks that the destination then holds no value
	// for that field (Target.Lookup counts an absent field as equal to an
	// empty one) and, with CapVerify, that Verify holds Cleared(i) landed
	// only after it was written (docs/guide.md#a-value-cleared-in-the-source).
	Cleared func(i int) destination.Record
}

// maxPolls bounds the polls of Outcomes for one process.
const maxPolls = 100

// Record returns a distinct valid record for i: a 64-hex key and data
// {"email": "user<i>@example.com", "attributes": {"FIRSTNAME": ..., "AGE": ...}}.
func Record(i int) destination.Record {
	sum := sha256.Sum256([]byte(fmt.Sprintf("destinationtest-record-%d", i)))
	return destination.Record{
		Key: hex.EncodeToString(sum[:]),
		Data: map[string]any{
			"email": fmt.Sprintf("user%d@example.com", i),
			"attributes": map[string]any{
				"FIRSTNAME": fmt.Sprintf("First%d", i),
				"AGE":       float64(20 + i%50),
			},
		},
	}
}

// NoSleep is a Sleep that returns at once (unless ctx is done).
func NoSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// blockingSleep never returns before ctx is done.
func blockingSleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	<-ctx.Done()
	return ctx.Err()
}

const suiteRetries = 2

// Run runs the acceptance suite against h. Every subtest is parallel and
// starts its own server.
func Run(t *testing.T, h Harness) {
	t.Helper()
	rec := h.Record
	if rec == nil {
		rec = Record
	}
	records := func(n int) []destination.Record {
		out := make([]destination.Record, n)
		for i := range out {
			out[i] = rec(i)
		}
		return out
	}
	setup := func(t *testing.T, f Faults) Target {
		t.Helper()
		tg := h.Setup(t, Config{Faults: f, Sleep: NoSleep, MaxRetries: suiteRetries, Clock: clock.NewFake(time.Now())})
		t.Cleanup(func() {
			if err := tg.Dest.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return tg
	}
	settle := func(t *testing.T, tg Target, recs []destination.Record, res []destination.Result) []destination.Result {
		t.Helper()
		return settle(t, h.Async, tg, recs, res)
	}

	t.Run("DeliversEveryRecord", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{})
		recs := records(25)
		res, err := tg.Dest.Write(t.Context(), recs)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		byKey := checkResults(t, recs, settle(t, tg, recs, res))
		for _, r := range recs {
			if got := byKey[r.Key]; got.Outcome != destination.Delivered {
				t.Errorf("record %s: outcome %v (%q), want delivered", r.Key[:8], got.Outcome, got.Message)
			}
		}
		if got := tg.Stored(); got != int64(len(recs)) {
			t.Errorf("server stores %d records, want %d", got, len(recs))
		}
	})

	t.Run("EmptyPageSendsNothing", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{})
		res, err := tg.Dest.Write(t.Context(), nil)
		if err != nil || len(res) != 0 {
			t.Fatalf("Write(nil) = %v, %v; want no results, no error", res, err)
		}
		if n := tg.Requests(); n != 0 {
			t.Errorf("server got %d requests for an empty page, want 0", n)
		}
	})

	t.Run("RejectedRecordsDoNotFailThePage", func(t *testing.T) {
		t.Parallel()
		recs := records(10)
		refused := map[string]bool{recs[3].Key: true, recs[7].Key: true}
		tg := setup(t, Faults{Refuse: []destination.Record{recs[3], recs[7]}})
		res, err := tg.Dest.Write(t.Context(), recs)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		byKey := checkResults(t, recs, settle(t, tg, recs, res))
		for _, r := range recs {
			got := byKey[r.Key]
			switch {
			case refused[r.Key] && got.Outcome != destination.Rejected:
				t.Errorf("refused record %s: outcome %v, want rejected", r.Key[:8], got.Outcome)
			case refused[r.Key] && got.Message == "":
				t.Errorf("refused record %s: empty rejection message", r.Key[:8])
			case refused[r.Key] && holdsEmail(got.Message, r):
				t.Errorf("refused record %s: rejection message %q holds its e-mail address", r.Key[:8], got.Message)
			case !refused[r.Key] && got.Outcome != destination.Delivered:
				t.Errorf("record %s: outcome %v (%q), want delivered", r.Key[:8], got.Outcome, got.Message)
			}
		}
		if got := tg.Stored(); got != int64(len(recs)-len(refused)) {
			t.Errorf("server stores %d records, want %d", got, len(recs)-len(refused))
		}
	})

	t.Run("JudgeAgreesWithWrite", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{})
		j, ok := tg.Dest.(destination.Judge)
		if !ok {
			t.Skip("the destination is not a destination.Judge")
		}
		recs := records(6)
		// Records no destination can take: an e-mail that is not text, and
		// attributes that are not an object.
		recs[1].Data["email"] = 42
		recs[4].Data["attributes"] = "FIRSTNAME"
		refused, err := j.Judge(t.Context(), recs)
		if err != nil || len(refused) != len(recs) {
			t.Fatalf("Judge = %q, %v; want one answer per record", refused, err)
		}
		res, err := tg.Dest.Write(t.Context(), recs)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		byKey := checkResults(t, recs, settle(t, tg, recs, res))
		for i, r := range recs {
			got := byKey[r.Key]
			wantRefused := i == 1 || i == 4
			switch {
			case wantRefused != (refused[i] != ""):
				t.Errorf("record %d: Judge said %q", i, refused[i])
			case refused[i] != "" && (got.Outcome != destination.Rejected || got.Message != refused[i]):
				t.Errorf("record %d: Judge said %q, Write %v %q", i, refused[i], got.Outcome, got.Message)
			case refused[i] == "" && got.Outcome != destination.Delivered:
				t.Errorf("record %d: Judge let it pass, Write %v %q", i, got.Outcome, got.Message)
			}
		}
		if got := tg.Stored(); got != int64(len(recs)-2) {
			t.Errorf("server stores %d records, want %d", got, len(recs)-2)
		}
	})

	t.Run("AuthFailureIsPermanentAndImmediate", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{Unauthorized: true})
		recs := records(1)
		_, err := tg.Dest.Write(t.Context(), recs)
		if got := failure.CodeOf(err); got != failure.DestinationAuth {
			t.Fatalf("Write error %v: code %s, want %s", err, got, failure.DestinationAuth)
		}
		if failure.Retryable(err) {
			t.Errorf("auth failure must not be retryable")
		}
		if n := tg.Requests(); n != 1 {
			t.Errorf("server got %d requests, want 1 (no retry on auth failure)", n)
		}
		checkSafe(t, err, tg.Secrets, recs)
	})

	t.Run("TransientServerErrorsAreRetried", func(t *testing.T) {
		t.Parallel()
		tg := h.Setup(t, Config{Faults: Faults{Flaky: true}, Sleep: NoSleep, MaxRetries: 10, Clock: clock.NewFake(time.Now())})
		t.Cleanup(func() { _ = tg.Dest.Close() })
		recs := records(10)
		res, err := tg.Dest.Write(t.Context(), recs)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		byKey := checkResults(t, recs, settle(t, tg, recs, res))
		for _, r := range recs {
			if got := byKey[r.Key]; got.Outcome != destination.Delivered {
				t.Errorf("record %s: outcome %v, want delivered", r.Key[:8], got.Outcome)
			}
		}
		if tg.ServerErrors() == 0 {
			t.Errorf("the flaky server sent no 5xx: the test proves nothing")
		}
	})

	t.Run("UnavailableAfterRetries", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{Unavailable: true})
		recs := records(1)
		_, err := tg.Dest.Write(t.Context(), recs)
		if got := failure.CodeOf(err); got != failure.DestinationUnavailable {
			t.Fatalf("Write error %v: code %s, want %s", err, got, failure.DestinationUnavailable)
		}
		if !failure.Retryable(err) {
			t.Errorf("unavailable must be retryable")
		}
		if n := tg.Requests(); n != suiteRetries+1 {
			t.Errorf("server got %d requests, want %d (1 + %d retries)", n, suiteRetries+1, suiteRetries)
		}
		checkSafe(t, err, tg.Secrets, recs)
	})

	t.Run("ContextCancelIsHonoured", func(t *testing.T) {
		t.Parallel()
		var slept atomic.Int64
		sleep := func(ctx context.Context, d time.Duration) error {
			slept.Add(1)
			return blockingSleep(ctx, d)
		}
		tg := h.Setup(t, Config{Faults: Faults{Unavailable: true}, Sleep: sleep, MaxRetries: 1000, Clock: clock.NewFake(time.Now())})
		t.Cleanup(func() { _ = tg.Dest.Close() })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := tg.Dest.Write(ctx, records(3))
			done <- err
		}()
		// Let it reach the retry loop, then cancel.
		deadline := time.Now().Add(5 * time.Second)
		for tg.Requests() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Write after cancel = %v, want an error wrapping context.Canceled", err)
			}
			if failure.CodeOf(err) == failure.Internal {
				t.Errorf("Write after cancel returned no catalog code: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Write did not return within 5 s of its context being cancelled")
		}
	})

	t.Run("CancelledContextSendsNothing", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := tg.Dest.Write(ctx, records(3))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Write on a cancelled context = %v, want context.Canceled", err)
		}
		if n := tg.Requests(); n != 0 {
			t.Errorf("server got %d requests on a cancelled context, want 0", n)
		}
	})

	runTransport(t, h, records)
	runLostAnswers(t, h, records)
	runWriteModes(t, h, records)
	runCleared(t, h, records)

	t.Run("VerifyMatchesCapability", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{})
		recs := records(6)
		written, notWritten := recs[:3], recs[3:]
		since := time.Now().Add(-time.Minute)
		if tg.Dest.Capability() != destination.CapVerify {
			if _, err := tg.Dest.Verify(t.Context(), recs, since); err == nil {
				t.Errorf("Verify on a %s destination returned no error", tg.Dest.Capability())
			}
			return
		}
		res, err := tg.Dest.Write(t.Context(), written)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		// An accepted write is settled by Outcomes (the runner's poller)
		// before anything could verify it.
		settle(t, tg, written, res)
		landed, err := tg.Dest.Verify(t.Context(), recs, since)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		for _, r := range written {
			if _, ok := landed[r.Key]; !ok {
				t.Errorf("written record %s not reported as landed", r.Key[:8])
			}
		}
		for _, r := range notWritten {
			if _, ok := landed[r.Key]; ok {
				t.Errorf("never-written record %s reported as landed", r.Key[:8])
			}
		}
	})

	if !h.Async {
		return
	}

	t.Run("AsyncOutcomesWaitForTheProcess", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{})
		recs := records(12)
		res, err := tg.Dest.Write(t.Context(), recs)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		checkResults(t, recs, res)
		async := tg.Dest.(destination.Async)
		refs := map[string][]destination.Record{}
		byKey := recordsByKey(recs)
		for _, r := range res {
			if r.Outcome != destination.Accepted {
				t.Fatalf("record %s: outcome %v, want accepted (an asynchronous write)", r.Key[:8], r.Outcome)
			}
			refs[r.Ref] = append(refs[r.Ref], byKey[r.Key])
		}
		if tg.Advance != nil {
			for ref, rs := range refs {
				got, done, err := async.Outcomes(t.Context(), ref, rs)
				if err != nil || done || len(got) != 0 {
					t.Fatalf("Outcomes(%s) before processing = %v, %v, %v; want not done, no results", ref, got, done, err)
				}
			}
			if n := tg.Stored(); n != 0 {
				t.Errorf("server stores %d records before processing, want 0", n)
			}
		}
		final := checkResults(t, recs, settle(t, tg, recs, res))
		for _, r := range recs {
			if got := final[r.Key]; got.Outcome != destination.Delivered {
				t.Errorf("record %s: outcome %v (%q), want delivered", r.Key[:8], got.Outcome, got.Message)
			}
		}
		if got := tg.Stored(); got != int64(len(recs)) {
			t.Errorf("server stores %d records, want %d", got, len(recs))
		}
		// Asking again is harmless and answers alike: Outcomes never writes.
		for ref, rs := range refs {
			again, done, err := async.Outcomes(t.Context(), ref, rs)
			if err != nil || !done || len(again) != len(rs) {
				t.Fatalf("Outcomes(%s) again = %d results, %v, %v", ref, len(again), done, err)
			}
			for _, r := range again {
				if r.Outcome != destination.Delivered {
					t.Errorf("Outcomes again: record %s %v, want delivered", r.Key[:8], r.Outcome)
				}
			}
		}
		if got := tg.Stored(); got != int64(len(recs)) {
			t.Errorf("after asking again the server stores %d records, want %d", got, len(recs))
		}
	})

	t.Run("AsyncFailedProcessIsNotSent", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{FailProcess: true})
		recs := records(8)
		res, err := tg.Dest.Write(t.Context(), recs)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		byKey := checkResults(t, recs, settle(t, tg, recs, res))
		for _, r := range recs {
			if got := byKey[r.Key]; got.Outcome != destination.NotSent {
				t.Errorf("record %s of a failed process: outcome %v, want not sent", r.Key[:8], got.Outcome)
			}
		}
		if got := tg.Stored(); got != 0 {
			t.Errorf("server stores %d records of a failed process, want 0", got)
		}
	})
}

// settle returns res with every Accepted result replaced by what its
// process did, polling Outcomes (at most maxPolls times per process, calling
// tg.Advance between polls) until done. Without async, no result may be
// Accepted.
func settle(t *testing.T, async bool, tg Target, recs []destination.Record, res []destination.Result) []destination.Result {
	t.Helper()
	byKey := recordsByKey(recs)
	var (
		out  []destination.Result
		refs = map[string][]destination.Record{}
	)
	for _, r := range res {
		if r.Outcome != destination.Accepted {
			out = append(out, r)
			continue
		}
		if !async {
			t.Fatalf("record %s: accepted, but the harness does not declare Async", r.Key[:8])
		}
		if r.Ref == "" {
			t.Fatalf("record %s: accepted without a Ref (the process to ask)", r.Key[:8])
		}
		refs[r.Ref] = append(refs[r.Ref], byKey[r.Key])
	}
	if len(refs) == 0 {
		return out
	}
	a, ok := tg.Dest.(destination.Async)
	if !ok {
		t.Fatalf("%T answered Accepted but does not implement destination.Async", tg.Dest)
	}
	for ref, rs := range refs {
		for poll := 0; ; poll++ {
			if poll == maxPolls {
				t.Fatalf("process %s not done after %d polls", ref, maxPolls)
			}
			got, done, err := a.Outcomes(t.Context(), ref, rs)
			if err != nil {
				t.Fatalf("Outcomes(%s): %v", ref, err)
			}
			if !done {
				if len(got) != 0 {
					t.Errorf("Outcomes(%s): %d results while not done", ref, len(got))
				}
				if tg.Advance != nil {
					tg.Advance()
				} else {
					time.Sleep(time.Millisecond)
				}
				continue
			}
			checkResults(t, rs, got)
			for _, g := range got {
				if g.Outcome == destination.Accepted {
					t.Errorf("Outcomes(%s): record %s still accepted once done", ref, g.Key[:8])
				}
			}
			out = append(out, got...)
			break
		}
	}
	return out
}

func recordsByKey(recs []destination.Record) map[string]destination.Record {
	m := make(map[string]destination.Record, len(recs))
	for _, r := range recs {
		m[r.Key] = r
	}
	return m
}

// holdsEmail reports whether msg holds a string value of r's data that looks
// like an e-mail address.
func holdsEmail(msg string, r destination.Record) bool {
	for _, v := range stringsOf(r.Data) {
		if strings.Contains(v, "@") && strings.Contains(strings.ToLower(msg), strings.ToLower(v)) {
			return true
		}
	}
	return false
}

// runTransport runs the cases about the transport every destination shares
// (internal/apiclient): redirects, refused connections, attempt deadlines.
func runTransport(t *testing.T, h Harness, records func(int) []destination.Record) {
	// advancing is a Sleep that records each wait and moves clk by it, so
	// that time passes only through the destination's own waits.
	type advancing struct {
		mu    sync.Mutex
		clk   *clock.Fake
		waits []time.Duration
	}
	newAdvancing := func() *advancing { return &advancing{clk: clock.NewFake(time.Now())} }
	sleepOf := func(a *advancing) func(context.Context, time.Duration) error {
		return func(ctx context.Context, d time.Duration) error {
			a.mu.Lock()
			a.waits = append(a.waits, d)
			a.mu.Unlock()
			a.clk.Advance(d)
			return ctx.Err()
		}
	}
	setup := func(t *testing.T, f Faults, a *advancing, retries int) Target {
		t.Helper()
		tg := h.Setup(t, Config{Faults: f, Sleep: sleepOf(a), MaxRetries: retries, Clock: a.clk})
		t.Cleanup(func() { _ = tg.Dest.Close() })
		return tg
	}
	// allNotSent asserts one NotSent result per record and nothing stored.
	allNotSent := func(t *testing.T, tg Target, recs []destination.Record, res []destination.Result) {
		t.Helper()
		byKey := checkResults(t, recs, res)
		for _, r := range recs {
			got, ok := byKey[r.Key]
			switch {
			case !ok:
				t.Errorf("record %s: no result (in doubt), want not sent", r.Key[:8])
			case got.Outcome != destination.NotSent:
				t.Errorf("record %s: outcome %v, want not sent", r.Key[:8], got.Outcome)
			}
		}
		if n := tg.Stored(); n != 0 {
			t.Errorf("server stores %d records, want 0", n)
		}
	}

	t.Run("RedirectIsNotFollowed", func(t *testing.T) {
		t.Parallel()
		var (
			leaked  atomic.Int64
			carried atomic.Bool // the other origin received a secret
			secrets atomic.Pointer[[]string]
		)
		a := newAdvancing()
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			leaked.Add(1)
			body, _ := io.ReadAll(r.Body)
			dump := fmt.Sprint(r.Header) + r.URL.String() + string(body)
			if p := secrets.Load(); p != nil {
				for _, s := range *p {
					if s != "" && strings.Contains(dump, s) {
						carried.Store(true)
					}
				}
			}
		}))
		t.Cleanup(other.Close)
		tg := setup(t, Faults{RedirectTo: other.URL}, a, suiteRetries)
		secrets.Store(&tg.Secrets)
		// One record: a page-level failure cancels its siblings' requests,
		// which may then be in doubt.
		recs := records(1)
		res, err := tg.Dest.Write(t.Context(), recs)
		if n := leaked.Load(); n != 0 {
			t.Errorf("the other origin received %d requests, want 0 (a secret among them: %v)", n, carried.Load())
		}
		if got := failure.CodeOf(err); got != failure.DestinationUnavailable {
			t.Fatalf("Write error %v: code %s, want %s", err, got, failure.DestinationUnavailable)
		}
		if n := tg.Requests(); n != 1 {
			t.Errorf("server got %d requests, want 1 (a redirect is not retried)", n)
		}
		// A 307 says the request must be made elsewhere: it was not processed.
		if !errors.Is(err, destination.ErrNotSent) {
			t.Errorf("Write error %v does not wrap ErrNotSent", err)
		}
		allNotSent(t, tg, recs, res)
		checkSafe(t, err, tg.Secrets, recs)
	})

	t.Run("ConnectionRefusedIsNotSent", func(t *testing.T) {
		t.Parallel()
		a := newAdvancing()
		tg := setup(t, Faults{Refused: true}, a, suiteRetries)
		recs := records(10)
		res, err := tg.Dest.Write(t.Context(), recs)
		if got := failure.CodeOf(err); got != failure.DestinationUnavailable {
			t.Fatalf("Write error %v: code %s, want %s", err, got, failure.DestinationUnavailable)
		}
		if !errors.Is(err, destination.ErrNotSent) {
			t.Errorf("Write error %v does not wrap ErrNotSent", err)
		}
		allNotSent(t, tg, recs, res)
		checkSafe(t, err, tg.Secrets, recs)
	})

	t.Run("CancelledContextIsNotSent", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{}, newAdvancing(), suiteRetries)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		recs := records(3)
		res, err := tg.Dest.Write(ctx, recs)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, destination.ErrNotSent) {
			t.Fatalf("Write on a cancelled context = %v, want context.Canceled and ErrNotSent", err)
		}
		allNotSent(t, tg, recs, res)
	})

	t.Run("PastAttemptDeadlineSendsNothing", func(t *testing.T) {
		t.Parallel()
		a := newAdvancing()
		tg := setup(t, Faults{}, a, suiteRetries)
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return a.clk.Now().Add(-time.Second) })
		recs := records(3)
		res, err := tg.Dest.Write(ctx, recs)
		if got := failure.CodeOf(err); got != failure.LeaseLost {
			t.Fatalf("Write error %v: code %s, want %s", err, got, failure.LeaseLost)
		}
		if !errors.Is(err, destination.ErrNoLeaseTime) || !errors.Is(err, destination.ErrNotSent) {
			t.Errorf("Write error %v, want ErrNoLeaseTime and ErrNotSent", err)
		}
		if n := tg.Requests(); n != 0 {
			t.Errorf("server got %d requests past the attempt deadline, want 0", n)
		}
		allNotSent(t, tg, recs, res)
	})

	t.Run("RateLimitWaitPastDeadlineIsNotTaken", func(t *testing.T) {
		t.Parallel()
		a := newAdvancing()
		tg := setup(t, Faults{RateLimited: 30 * time.Second}, a, suiteRetries)
		until := a.clk.Now().Add(10 * time.Second)
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return until })
		recs := records(1)
		res, err := tg.Dest.Write(ctx, recs)
		if got := failure.CodeOf(err); got != failure.DestinationRateLimited {
			t.Fatalf("Write error %v: code %s, want %s", err, got, failure.DestinationRateLimited)
		}
		if !errors.Is(err, destination.ErrNoLeaseTime) {
			t.Errorf("Write error %v does not wrap ErrNoLeaseTime", err)
		}
		if a.clk.Now().After(until) {
			t.Errorf("waited %v, past the attempt deadline", a.waits)
		}
		if n := tg.Requests(); n != 1 {
			t.Errorf("server got %d requests, want 1", n)
		}
		// A 429 says the request was not processed.
		allNotSent(t, tg, recs, res)
	})

	t.Run("BackoffPastDeadlineIsNotTaken", func(t *testing.T) {
		t.Parallel()
		a := newAdvancing()
		tg := setup(t, Faults{Unavailable: true}, a, 1000)
		until := a.clk.Now().Add(time.Minute)
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return until })
		res, err := tg.Dest.Write(ctx, records(1))
		if got := failure.CodeOf(err); got != failure.DestinationUnavailable {
			t.Fatalf("Write error %v: code %s, want %s", err, got, failure.DestinationUnavailable)
		}
		if !errors.Is(err, destination.ErrNoLeaseTime) {
			t.Errorf("Write error %v does not wrap ErrNoLeaseTime", err)
		}
		if a.clk.Now().After(until) {
			t.Errorf("waited %s in all, past the attempt deadline (1m)", a.clk.Now().Sub(until.Add(-time.Minute)))
		}
		if n := tg.Requests(); n >= 1001 {
			t.Errorf("server got %d requests: every retry was made", n)
		}
		for _, r := range res {
			if r.Outcome != destination.NotSent {
				t.Errorf("record %s: outcome %v, want not sent or no result (in doubt)", r.Key[:8], r.Outcome)
			}
		}
	})

	t.Run("RenewedDeadlineIsReadAgain", func(t *testing.T) {
		t.Parallel()
		a := newAdvancing()
		tg := setup(t, Faults{RateLimited: 3 * time.Second}, a, suiteRetries)
		// A lease renewed all along: the deadline stays 5 s ahead, so each
		// 3 s wait fits although together they outlast the first deadline.
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return a.clk.Now().Add(5 * time.Second) })
		_, err := tg.Dest.Write(ctx, records(1))
		if got := failure.CodeOf(err); got != failure.DestinationRateLimited || errors.Is(err, destination.ErrNoLeaseTime) {
			t.Fatalf("Write error %v: want %s after every retry, not ErrNoLeaseTime", err, failure.DestinationRateLimited)
		}
		if n := tg.Requests(); n != suiteRetries+1 {
			t.Errorf("server got %d requests, want %d", n, suiteRetries+1)
		}
	})
}

// checkResults asserts exactly one result per record key and returns them by key.
func checkResults(t *testing.T, recs []destination.Record, res []destination.Result) map[string]destination.Result {
	t.Helper()
	want := make(map[string]bool, len(recs))
	for _, r := range recs {
		want[r.Key] = true
	}
	byKey := make(map[string]destination.Result, len(res))
	for _, r := range res {
		if !want[r.Key] {
			t.Errorf("result for unknown key %q", r.Key)
		}
		if _, dup := byKey[r.Key]; dup {
			t.Errorf("two results for key %s", r.Key[:8])
		}
		byKey[r.Key] = r
	}
	if len(byKey) != len(want) {
		t.Errorf("%d results for %d records", len(byKey), len(want))
	}
	return byKey
}

// checkSafe asserts that err's text holds no secret and no string value of
// the records' data that looks like an e-mail address.
func checkSafe(t *testing.T, err error, secrets []string, recs []destination.Record) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("error %q holds a secret", msg)
		}
	}
	for _, r := range recs {
		for _, v := range stringsOf(r.Data) {
			if strings.Contains(v, "@") && strings.Contains(msg, v) {
				t.Errorf("error %q holds an e-mail address", msg)
			}
		}
	}
}

func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case map[string]any:
		var out []string
		for _, x := range v {
			out = append(out, stringsOf(x)...)
		}
		return out
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, stringsOf(x)...)
		}
		return out
	}
	return nil
}
