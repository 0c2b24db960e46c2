package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/store"
)

// TestMappingChangeRereadsKeysetSource: on a keyset source, whose cursor
// moves past every row it read, a run after a mapping change reads the
// source from its start and sends every record with its new mapped values;
// the run after that reads nothing again. A cursor saved before prints were
// kept is trusted.
func TestMappingChangeRereadsKeysetSource(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	src := &keysetSource{rows: map[int]string{}}
	for i := 1; i <= 250; i++ {
		src.rows[i] = fmt.Sprintf("N%d", i)
	}
	params := func(firstname string) Params {
		p := tb.params(t, "id")
		p.Source = src
		p.Sync.Mapping = mapping.Spec{Email: "email", Attributes: map[string]string{"FIRSTNAME": firstname}}
		return p
	}
	ctx := context.Background()
	for i, step := range []struct {
		column        string
		read, written int64
	}{
		{"first_name", 250, 250}, // first run
		{"first_name", 0, 0},     // nothing new
		{"id", 250, 250},         // the mapping changed: everything again, once
		{"id", 0, 0},             // nothing new under the new mapping
		{"id", 0, 0},
	} {
		p := params(step.column)
		pv, err := RunPreview(ctx, PreviewParams{Store: p.Store, Source: p.Source, Sync: p.Sync})
		if wantChanged := i == 2; err != nil || pv.Changed != wantChanged || pv.Read != step.read {
			t.Fatalf("dry run before run %d: %v changed %v read %d; want changed %v read %d", i+1, err, pv.Changed, pv.Read, wantChanged, step.read)
		}
		r, err := Run(ctx, p)
		if err != nil || r.Read != step.read || r.Written != step.written {
			t.Fatalf("run %d (FIRSTNAME from %s): %v read %d written %d; want read %d written %d",
				i+1, step.column, err, r.Read, r.Written, step.read, step.written)
		}
	}
	if got := tb.dest.value(email(7)); fmt.Sprint(got) != "7" {
		t.Fatalf("FIRSTNAME of row 7 after the mapping change: %v, want 7", got)
	}
	if cur, _ := tb.store.GetCursor(ctx, "s1"); cur.Payload != payloadPrint(params("id"), "") {
		t.Fatalf("saved cursor payload %q, want the new mapping's %q", cur.Payload, payloadPrint(params("id"), ""))
	}

	for _, tc := range []struct {
		name        string
		cur         store.Cursor
		reset       bool
		want        string
		wantChanged bool
	}{
		{"same print", store.Cursor{Value: "c", Payload: "p"}, false, "c", false},
		{"other print", store.Cursor{Value: "c", Payload: "q"}, false, "", true},
		{"saved before prints", store.Cursor{Value: "c"}, false, "c", false},
		{"at the start", store.Cursor{Payload: "q"}, false, "", false},
		{"reset", store.Cursor{Value: "c", Payload: "p"}, true, "", false},
	} {
		if got, changed := startCursor(tc.cur, "p", tc.reset); got != tc.want || changed != tc.wantChanged {
			t.Errorf("%s: startCursor = %q, %v; want %q, %v", tc.name, got, changed, tc.want, tc.wantChanged)
		}
	}
}

// TestDestinationPayloadChangeResends: a change of the destination settings
// that shape every record (Brevo's list_ids) sends every record again, on a
// keyset source too, and so does the change back; under unchanged settings
// nothing is sent. The sync's first settings are its base: their hashes are
// the mapped values' alone, as before bases existed.
func TestDestinationPayloadChangeResends(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	src := &keysetSource{rows: map[int]string{}}
	for i := 1; i <= 250; i++ {
		src.rows[i] = fmt.Sprintf("N%d", i)
	}
	ctx := context.Background()
	for i, step := range []struct {
		lists         string
		read, written int64
		changed       bool
	}{
		{"list_ids=2", 250, 250, false}, // first run: the base
		{"list_ids=2", 0, 0, false},
		{"list_ids=2,7", 250, 250, true}, // a list added: every record again, once
		{"list_ids=2,7", 0, 0, false},
		{"list_ids=2", 250, 250, true}, // and back
		{"list_ids=2", 0, 0, false},
		{"", 250, 250, true}, // no list at all
	} {
		p := tb.params(t, "id")
		p.Source = src
		p.Sync.DestinationPayload = step.lists
		pv, err := RunPreview(ctx, PreviewParams{Store: p.Store, Source: p.Source, Sync: p.Sync})
		if err != nil || pv.Changed != step.changed || pv.Read != step.read {
			t.Fatalf("dry run before run %d: %v changed %v read %d; want changed %v read %d", i+1, err, pv.Changed, pv.Read, step.changed, step.read)
		}
		r, err := Run(ctx, p)
		if err != nil || r.Read != step.read || r.Written != step.written {
			t.Fatalf("run %d (%q): %v read %d written %d; want read %d written %d",
				i+1, step.lists, err, r.Read, r.Written, step.read, step.written)
		}
	}
	if base, found, err := tb.store.GetPayloadBase(ctx, "s1"); err != nil || !found || base != "list_ids=2" {
		t.Fatalf("payload base = %q, %v, %v; want the first run's list_ids=2", base, found, err)
	}
}

// TestDestinationAddressChangeResends: records delivered to one account are
// not at another; a sync pointed at another account (another API key or
// base_url) sends every record there once, on a keyset source too, and so
// does the change back. The first address is the base: a sync recorded
// before addresses were kept sends nothing again.
func TestDestinationAddressChangeResends(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	src := &keysetSource{rows: map[int]string{}}
	for i := 1; i <= 250; i++ {
		src.rows[i] = fmt.Sprintf("N%d", i)
	}
	ctx := context.Background()
	for i, step := range []struct {
		addr          string
		read, written int64
		changed       bool
	}{
		{"brevo https://api.brevo.com/v3 key:aaaa", 250, 250, false}, // first run: the base
		{"brevo https://api.brevo.com/v3 key:aaaa", 0, 0, false},
		{"brevo https://api.brevo.com/v3 key:bbbb", 250, 250, true}, // another account: everything there, once
		{"brevo https://api.brevo.com/v3 key:bbbb", 0, 0, false},
		{"brevo https://api.brevo.com/v3 key:aaaa", 250, 250, true}, // and back
		{"brevo https://api.brevo.com/v3 key:aaaa", 0, 0, false},
	} {
		p := tb.params(t, "id")
		p.Source = src
		p.Sync.DestinationPayload = "list_ids=2"
		p.Sync.DestinationAddress = step.addr
		pv, err := RunPreview(ctx, PreviewParams{Store: p.Store, Source: p.Source, Sync: p.Sync})
		if err != nil || pv.Changed != step.changed || pv.Read != step.read {
			t.Fatalf("dry run before run %d: %v changed %v read %d; want changed %v read %d", i+1, err, pv.Changed, pv.Read, step.changed, step.read)
		}
		r, err := Run(ctx, p)
		if err != nil || r.Read != step.read || r.Written != step.written {
			t.Fatalf("run %d (%q): %v read %d written %d; want read %d written %d",
				i+1, step.addr, err, r.Read, r.Written, step.read, step.written)
		}
	}
	// Under its first address and settings, a record's hash is its mapped
	// values' alone, as before addresses were kept.
	p := tb.params(t, "id")
	p.Sync.DestinationPayload, p.Sync.DestinationAddress = "list_ids=2", "brevo https://api.brevo.com/v3 key:aaaa"
	r := &run{Params: p}
	r.setSalt("list_ids=2", "brevo https://api.brevo.com/v3 key:aaaa")
	if r.salt != "" {
		t.Fatalf("salt under the base settings and address = %q, want none", r.salt)
	}
}

// TestAcceptedUnderAnotherAccount: a run killed while its imports were
// still processing, and the sync pointed at another account before the
// next run (or its processes gone from the account): the next run cannot
// learn what became of them, since the destination does not know those
// processes. It settles their records as writes in doubt (read back, then
// sent) instead of failing every run, and the new account gets every
// record, with its value, once.
func TestAcceptedUnderAnotherAccount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		address  string // the second run's; the first's is "brevo key:a"
		notAsync bool   // the second run's destination cannot be asked at all
	}{
		{"address changed", "brevo key:b", false},
		{"same address, processes gone", "brevo key:a", false},
		{"another type of destination", "webhook http://x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, 300, destination.CapVerify)
			tb.dest.async, tb.dest.pollsToDone = true, 1_000_000
			p := tb.params(t, "id")
			p.Sync.DestinationAddress = "brevo key:a"
			p.PollInterval, p.AcceptedWait = time.Millisecond, 20*time.Millisecond
			if _, err := Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if accepted, _ := tb.store.LedgerList(context.Background(), "s1", store.LedgerAccepted, 0); len(accepted) != 300 {
				t.Fatalf("%d records left accepted by the first run, want 300", len(accepted))
			}

			other := newMemDest(destination.CapVerify) // the other account: none of the processes
			other.async = true
			tb.dest = other
			p = tb.params(t, "id")
			p.Sync.DestinationAddress = tc.address
			if tc.notAsync {
				p.Destination = notAsync{other}
			}
			p.PollInterval = time.Millisecond
			r, err := Run(context.Background(), p)
			if err != nil {
				t.Fatalf("run against the other account: %v", err)
			}
			if r.Read != 300 || r.Written != 300 {
				t.Fatalf("run against the other account: read %d written %d, want 300 and 300", r.Read, r.Written)
			}
			if _, recs, dups := other.stats(); recs != 300 || dups != 0 {
				t.Fatalf("other account: %d records, %d duplicates; want 300, 0", recs, dups)
			}
			if got := other.value(email(42)); fmt.Sprint(got) != "N42" {
				t.Fatalf("row 42 at the other account: %v, want N42", got)
			}
			for _, st := range []store.LedgerState{store.LedgerAccepted, store.LedgerPending, store.LedgerInDoubt} {
				if left, _ := tb.store.LedgerList(context.Background(), "s1", st, 0); len(left) != 0 {
					t.Fatalf("%d entries left %s", len(left), st)
				}
			}
			r3, err := Run(context.Background(), p)
			if err != nil || r3.Written != 0 {
				t.Fatalf("the run after: %v, written %d; want nothing", err, r3.Written)
			}
		})
	}
}

// notAsync is d without its Outcomes: a destination that accepts nothing
// for later (a webhook).
type notAsync struct{ d *memDest }

func (n notAsync) Capability() destination.Capability { return n.d.Capability() }
func (n notAsync) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	n.d.mu.Lock()
	n.d.async = false
	n.d.mu.Unlock()
	return n.d.Write(ctx, recs)
}
func (n notAsync) Verify(ctx context.Context, recs []destination.Record, since time.Time) (map[string]string, error) {
	return n.d.Verify(ctx, recs, since)
}
func (n notAsync) Close() error { return nil }

// TestSourceMovedSendsOnlyChanges: the sync's file moved (or its table is
// read through another server): the run reads it from its start, and a row
// is sent only when its values are not what the destination holds, as the
// slots of the sync's first source id are kept (docs/guide.md#changing-a-sync).
// With an identity and without one.
func TestSourceMovedSendsOnlyChanges(t *testing.T) {
	t.Parallel()
	for _, identity := range []string{"id", ""} {
		t.Run("identity="+identity, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, 250, destination.CapVerify)
			if r, err := Run(context.Background(), tb.params(t, identity)); err != nil || r.Written != 250 {
				t.Fatalf("first run: %v, written %d", err, r.Written)
			}
			raw, err := os.ReadFile(tb.csv)
			if err != nil {
				t.Fatal(err)
			}
			tb.csv = filepath.Join(t.TempDir(), "moved.csv")
			// Row 240 changes in a value of its length, so no page's place moves.
			raw = bytes.Replace(raw, []byte(",N240\n"), []byte(",X240\n"), 1)
			if err := os.WriteFile(tb.csv, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			p := tb.params(t, identity)
			pv, err := RunPreview(context.Background(), PreviewParams{Store: p.Store, Source: p.Source, Sync: p.Sync})
			if err != nil || pv.Creates != 0 || pv.Updates != 1 {
				t.Fatalf("dry run after the move: %v create %d update %d; want 0 and 1", err, pv.Creates, pv.Updates)
			}
			calls, _, _ := tb.dest.stats()
			r, err := Run(context.Background(), p)
			if err != nil || r.Read != 250 || r.Written != 1 {
				t.Fatalf("run after the move: %v read %d written %d; want 250 read, 1 written", err, r.Read, r.Written)
			}
			if calls2, _, dups := tb.dest.stats(); dups != 0 || calls2 != calls+1 {
				t.Fatalf("after the move: %d more calls, %d duplicates; want 1 call, 0 duplicates", calls2-calls, dups)
			}
			if got := tb.dest.value(email(240)); fmt.Sprint(got) != "X240" {
				t.Fatalf("row 240 at the destination: %v, want X240", got)
			}
		})
	}
}

// TestLayoutChangeBackLeavesNothingStale: a sync's slots are kept under its
// partitions' ledgers (and named by its identity), so a sync run with 1
// partition, then 2, then 1 again meets its first slots again; a row that
// changed while it ran partitioned, and changed back, must not be judged
// delivered by the slot its first runs left: the destination holds the
// partitioned run's value. Each change of the layout sends every record
// once; the run after it sends nothing.
func TestLayoutChangeBackLeavesNothingStale(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	src := &keysetSource{rows: map[int]string{}}
	for i := 1; i <= 250; i++ {
		src.rows[i] = fmt.Sprintf("N%d", i)
	}
	if _, err := tb.store.PutSync(context.Background(), store.PutSyncParams{ID: "s1#p1", Workspace: "w", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, step := range []struct {
		id, layout    string
		row42         string
		read, written int64
	}{
		{"s1", "partitions=1", "N42", 250, 250},
		{"s1", "partitions=1", "N42", 0, 0},
		{"s1#p1", "partitions=2", "N42", 250, 250}, // its own ledger: every record once
		{"s1#p1", "partitions=2", "X42", 250, 1},   // row 42 changes (read from the start: ResetCursor)
		{"s1", "partitions=1", "N42", 250, 250},    // back: every record once, row 42 among them
		{"s1", "partitions=1", "N42", 0, 0},
	} {
		src.mu.Lock()
		src.rows[42] = step.row42
		src.mu.Unlock()
		p := tb.params(t, "id")
		p.Source = src
		p.Sync.ID, p.Sync.Layout = step.id, step.layout
		p.ResetCursor = i == 3 // the test source has no lookback: read row 42 again
		r, err := Run(ctx, p)
		if err != nil || r.Written != step.written {
			t.Fatalf("run %d (%s, %s): %v read %d written %d; want written %d", i+1, step.id, step.layout, err, r.Read, r.Written, step.written)
		}
		if got := tb.dest.value(email(42)); fmt.Sprint(got) != step.row42 {
			t.Fatalf("after run %d (%s, %s): row 42 at the destination is %v, the source's %s", i+1, step.id, step.layout, got, step.row42)
		}
	}
}

// TestNamedAccountKeepsItsAddress: with destination.account set, a key
// rotation (another credential under the same name) is the same account:
// nothing is sent again, also when the name was added after the sync's
// first runs; another name is another account, where every record goes
// once. Without the name, the rotation sent every record again.
func TestNamedAccountKeepsItsAddress(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	src := &keysetSource{rows: map[int]string{}}
	for i := 1; i <= 50; i++ {
		src.rows[i] = fmt.Sprintf("N%d", i)
	}
	ctx := context.Background()
	for i, step := range []struct {
		account, addr string
		written       int64
	}{
		{"", "brevo key:aaaa", 50},      // first run: the base
		{"acme", "brevo key:aaaa", 0},   // the name added: the same account
		{"acme", "brevo key:bbbb", 0},   // a rotated key under the name
		{"acme", "brevo key:cccc", 0},   // and another
		{"other", "brevo key:dddd", 50}, // another account, named so
		{"other", "brevo key:eeee", 0},  // its key rotated
		{"acme", "brevo key:ffff", 50},  // back to the first account
		{"acme", "brevo key:ffff", 0},
	} {
		p := tb.params(t, "id")
		p.Source = src
		p.ResetCursor = true // read every row: only the hashes decide
		p.Sync.DestinationAddress, p.Sync.Account = step.addr, step.account
		pv, err := RunPreview(ctx, PreviewParams{Store: p.Store, Source: p.Source, Sync: p.Sync, ResetCursor: true})
		if err != nil || pv.Creates+pv.Updates != step.written {
			t.Fatalf("dry run before run %d: %+v, %v; want %d to send", i+1, pv, err, step.written)
		}
		r, err := Run(ctx, p)
		if err != nil || r.Written != step.written {
			t.Fatalf("run %d (account %q, %q): %v written %d; want %d", i+1, step.account, step.addr, err, r.Written, step.written)
		}
	}
}

// tellingDest is a memDest whose vendor says which account its key reaches.
type tellingDest struct {
	*memDest
	id    string // "": ErrNoAccountID; "!": unavailable; "401": the key refused; "wait": until ctx ends
	asked int
	onAsk func() // when set, called as the vendor is asked
}

func (d *tellingDest) AccountID(ctx context.Context) (string, error) {
	d.asked++
	if d.onAsk != nil {
		d.onAsk()
	}
	switch d.id {
	case "wait":
		<-ctx.Done()
		return "", failure.Wrap(failure.DestinationUnavailable, ctx.Err(), "GET /account: no answer")
	case "":
		return "", destination.ErrNoAccountID
	case "!":
		return "", failure.New(failure.DestinationUnavailable, "GET /account answered 503")
	case "401":
		return "", failure.New(failure.DestinationAuth, "GET /account answered 401")
	}
	return d.id, nil
}

// accounts runs a sync of 50 rows, read whole every run (only the hashes
// decide), into a destination whose vendor tells which account a key
// reaches.
type accounts struct {
	tb   *testBundle
	dest *tellingDest
	src  *keysetSource
	p    Params // the last run's
}

func setupAccounts(t *testing.T) *accounts {
	tb := setup(t, 0, destination.CapVerify)
	a := &accounts{tb: tb, dest: &tellingDest{memDest: tb.dest}, src: &keysetSource{rows: map[int]string{}}}
	for i := 1; i <= 50; i++ {
		a.src.rows[i] = fmt.Sprintf("N%d", i)
	}
	return a
}

// run runs the sync with the destination.account name account, the
// address addr, and a vendor that says its key reaches id ("!": cannot
// tell now, "": will not tell, "401": refuses the key).
func (a *accounts) run(t *testing.T, account, addr, id string) (store.Run, error) {
	t.Helper()
	a.p = a.tb.params(t, "id")
	a.p.Source, a.p.Destination, a.p.ResetCursor = a.src, a.dest, true
	a.p.Sync.DestinationAddress, a.p.Sync.Account = addr, account
	a.dest.id, a.dest.asked = id, 0
	return Run(context.Background(), a.p)
}

// check fails run n unless the vendor was asked asked times by it and, when
// the run succeeded (ok), a dry run after it agrees: nothing left to send.
func (a *accounts) check(t *testing.T, n, asked int, ok bool) {
	t.Helper()
	if a.dest.asked != asked {
		t.Fatalf("run %d: the vendor was asked %d times, want %d", n, a.dest.asked, asked)
	}
	if !ok {
		return
	}
	pv, err := RunPreview(context.Background(), PreviewParams{Store: a.p.Store, Source: a.p.Source, Sync: a.p.Sync, ResetCursor: true})
	if err != nil || pv.Creates+pv.Updates != 0 {
		t.Fatalf("dry run after run %d: %+v, %v; want nothing to send", n, pv, err)
	}
}

// A new API key of the same account, as its vendor tells, sends nothing
// again without destination.account; another account, or a vendor that
// will not tell, sends every record (docs/guide.md#changing-a-sync).
func TestVendorToldAccountKeepsItsAddress(t *testing.T) {
	t.Parallel()
	a := setupAccounts(t)
	for i, step := range []struct {
		addr, id string
		written  int64
		fails    failure.Code // the run fails so, writing nothing
		asked    int          // the vendor asked (once per address)
	}{
		{"brevo key:aaaa", "401", 0, failure.DestinationAuth, 1}, // a refused key fails at once
		{"brevo key:aaaa", "!", 50, "", 1},                       // first run: nothing depends on the answer
		{"brevo key:aaaa", "brevo login a", 0, "", 1},            // asked now, recorded
		{"brevo key:bbbb", "brevo login a", 0, "", 1},            // a rotated key of the same account
		{"brevo key:bbbb", "brevo login a", 0, "", 0},            // known: not asked again
		{"brevo key:cccc", "", 50, "", 1},                        // the vendor will not tell: another account for all we know
		{"brevo key:dddd", "brevo login b", 50, "", 1},
		{"brevo key:eeee", "!", 0, failure.DestinationUnavailable, 1}, // cannot tell now: no guess
		{"brevo key:eeee", "brevo login b", 0, "", 1},                 // b's key rotated
		{"brevo key:aaaa", "brevo login a", 50, "", 0},                // back to a, which may be stale
		{"brevo key:ffff", "brevo login a", 0, "", 1},
	} {
		r, err := a.run(t, "", step.addr, step.id)
		switch {
		case step.fails != "":
			if failure.CodeOf(err) != step.fails || r.Written != 0 {
				t.Fatalf("run %d (%q): %v, written %d; want %s and nothing written", i+1, step.addr, err, r.Written, step.fails)
			}
			if step.id == "!" && !strings.Contains(failure.Detail(err), "destination.account") {
				t.Fatalf("run %d: detail %q does not say how to skip the question", i+1, failure.Detail(err))
			}
		case err != nil || r.Written != step.written:
			t.Fatalf("run %d (%q, vendor %q): %v written %d; want %d", i+1, step.addr, step.id, err, r.Written, step.written)
		}
		a.check(t, i+1, step.asked, step.fails == "")
	}
}

// A destination.account name met for the first time takes the address the
// vendor's account stands for: set after a rotation the vendor confirmed,
// or together with a new key, it sends nothing again; once recorded, the
// name answers and the vendor is not asked.
func TestAccountNamedAfterARotation(t *testing.T) {
	t.Parallel()
	a := setupAccounts(t)
	for i, step := range []struct {
		account, addr, id string
		written           int64
		asked             int
	}{
		{"", "brevo key:aaaa", "brevo login a", 50, 1},
		{"", "brevo key:bbbb", "brevo login a", 0, 1},       // a rotation the vendor confirmed
		{"acme", "brevo key:bbbb", "brevo login a", 0, 0},   // the name set after it
		{"acme", "brevo key:cccc", "!", 0, 0},               // the name answers: not asked
		{"acme2", "brevo key:dddd", "brevo login a", 0, 1},  // a new name with a new key
		{"other", "brevo key:eeee", "brevo login b", 50, 1}, // another account
	} {
		r, err := a.run(t, step.account, step.addr, step.id)
		if err != nil || r.Written != step.written {
			t.Fatalf("run %d (account %q, %q, vendor %q): %v written %d; want %d", i+1, step.account, step.addr, step.id, err, r.Written, step.written)
		}
		a.check(t, i+1, step.asked, true)
	}
}

// TestFailedRunLeavesNoLayoutEpoch: a run under a misspelt identity column
// fails before it writes anything; the next run, under the sync's own
// layout again, sends nothing. The failed run recorded a layout epoch as it
// started, so the next one started yet another and sent every record again
// (an independent check, 2026-12-06: 200 duplicate writes).
func TestFailedRunLeavesNoLayoutEpoch(t *testing.T) {
	t.Parallel()
	tb := setup(t, 200, destination.CapVerify)
	ctx := context.Background()
	p := tb.params(t, "id")
	p.Sync.Layout = "identity=id"
	if r, err := Run(ctx, p); err != nil || r.Written != 200 {
		t.Fatalf("first run: %v %+v", err, r)
	}
	typo := tb.params(t, "ID")
	typo.Sync.Layout = "identity=ID"
	if _, err := Run(ctx, typo); failure.CodeOf(err) != failure.InvalidSyncDefinition {
		t.Fatalf("run with a misspelt identity: %v; want invalid_sync_definition", err)
	}
	p = tb.params(t, "id")
	p.Sync.Layout = "identity=id"
	p.ResetCursor = true
	r, err := Run(ctx, p)
	if err != nil || r.Written != 0 {
		t.Fatalf("the run after: %v, written %d of %d read; want nothing written", err, r.Written, r.Read)
	}
	if _, _, dups := tb.dest.stats(); dups != 0 {
		t.Fatalf("%d duplicate writes", dups)
	}
}

// A run stopped while it asks the vendor which account its key reaches (a
// SIGTERM's drain deadline during a slow GET /account) is interrupted, not
// a store failure: the store read after the cancelled question failed on the
// cancelled context and sent a person to fix a healthy store (an independent
// check, 2026-12-07).
func TestStoppedWhileAskingTheVendorIsInterrupted(t *testing.T) {
	t.Parallel()
	a := setupAccounts(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.dest.onAsk = cancel
	p := a.tb.params(t, "id")
	p.Source, p.Destination, p.ResetCursor = a.src, a.dest, true
	p.Sync.DestinationAddress = "https://api.example.com/v3"
	a.dest.id = "wait"
	r, err := Run(ctx, p)
	if failure.CodeOf(err) != failure.Interrupted || r.State != store.RunInterrupted {
		t.Fatalf("run stopped while asking the vendor: %s, %v; want interrupted", r.State, err)
	}
	if _, _, dups := a.dest.stats(); a.dest.asked != 1 || dups != 0 {
		t.Fatalf("vendor asked %d times, %d duplicates", a.dest.asked, dups)
	}
}
