package runner

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// TestStoreFailureDiskFull: a full disk is store_unavailable (retried like
// an outage) whose detail says what to free; an outage's detail does not.
func TestStoreFailureDiskFull(t *testing.T) {
	t.Parallel()
	full := fmt.Errorf("sqlite ledger claim: %w: %w: database or disk is full (13)", store.ErrUnavailable, store.ErrDiskFull)
	down := fmt.Errorf("postgres ledger claim: %w: connection refused", store.ErrUnavailable)
	for _, tc := range []struct {
		name string
		err  error
		full bool
	}{
		{"claim, full", storeFailure(context.Background(), full, "claim the page's records"), true},
		{"lease, full", acquireFailure(full), true},
		{"claim, down", storeFailure(context.Background(), down, "claim the page's records"), false},
		{"lease, down", acquireFailure(down), false},
	} {
		if got := failure.CodeOf(tc.err); got != failure.StoreUnavailable {
			t.Errorf("%s: code %s, want store_unavailable", tc.name, got)
		}
		if got := strings.Contains(failure.Detail(tc.err), "disk is full; free space"); got != tc.full {
			t.Errorf("%s: detail %q; says the disk is full: %v, want %v", tc.name, failure.Detail(tc.err), got, tc.full)
		}
	}
}

// TestRunStoppedWhileRecordedIsNotLeftRunning: a run stopped while its row
// is being written ends recorded, not running with no process behind it.
func TestRunStoppedWhileRecordedIsNotLeftRunning(t *testing.T) {
	t.Parallel()
	tb := setup(t, 10, destination.CapVerify)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := tb.params(t, "")
	p.Store = storetest.CancelOnInsert{Store: tb.store, Cancel: cancel}
	_, err := Run(ctx, p)
	if got := failure.CodeOf(err); got != failure.Interrupted {
		t.Fatalf("code %s (%v), want interrupted", got, err)
	}
	runs, err := tb.store.ListRuns(context.Background(), "s1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs recorded, want 1", len(runs))
	}
	if runs[0].State != store.RunInterrupted {
		t.Fatalf("run %d recorded %s, want interrupted", runs[0].ID, runs[0].State)
	}
	if calls, _, _ := tb.dest.stats(); calls != 0 {
		t.Fatalf("%d destination calls from a stopped run", calls)
	}
}

// TestEmptyExportIsCheckedAgainstItsHeader: a CSV with no rows succeeds
// when its header has the mapped columns, and fails when it lacks one or
// has no header at all (a broken export would otherwise succeed, silently,
// run after run).
func TestEmptyExportIsCheckedAgainstItsHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       failure.Code
	}{
		{"right header", "id,email,first_name\n", ""},
		{"wrong header", "foo,bar\n", failure.InvalidSyncDefinition},
		{"no identity column", "email,first_name\n", failure.InvalidSyncDefinition},
		{"empty file", "", failure.SourceQueryInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, 0, destination.CapVerify)
			if err := os.WriteFile(tb.csv, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), tb.params(t, "id"))
			if got := failure.CodeOf(err); (err == nil) != (tc.want == "") || (err != nil && got != tc.want) {
				t.Fatalf("run: %v (code %s), want code %q", err, got, tc.want)
			}
			if tc.want == "" && r.State != store.RunSucceeded {
				t.Fatalf("run state %s", r.State)
			}
		})
	}
}

// TestSourceFailureSaysItOnce: a source's error that already is a failure
// (its HTTP client's words) is the run's detail once; its Error() repeated
// the cause ("... (HTTP 401): shopify: POST graphql.json: HTTP 401").
func TestSourceFailureSaysItOnce(t *testing.T) {
	t.Parallel()
	cause := fmt.Errorf("shopify: POST graphql.json: HTTP 401: %w", source.ErrAuth)
	inner := failure.Wrap(failure.SourceAuth, cause, "Shopify refused the access token (HTTP 401)")
	got := sourceFailure(context.Background(), inner)
	if failure.CodeOf(got) != failure.SourceAuth || failure.Detail(got) != "Shopify refused the access token (HTTP 401)" {
		t.Fatalf("code %s, detail %q", failure.CodeOf(got), failure.Detail(got))
	}
	plain := fmt.Errorf("csv: %w: line 3 is cut", source.ErrInvalid)
	if d := failure.Detail(sourceFailure(context.Background(), plain)); d != plain.Error() {
		t.Fatalf("a plain error's detail %q, want its words", d)
	}
}

// TestEmptyIdentityIsRejected: rows whose identity cell is empty were taken
// for one record, the last of them, and the others were never sent (an
// independent check, 2026-12-06). Each is refused, listed, and the row with
// an identity is written.
func TestEmptyIdentityIsRejected(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	if err := os.WriteFile(tb.csv, []byte("id,email,first_name\n,a@x.io,A\n,b@x.io,B\n  ,c@x.io,C\n4,d@x.io,D\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), tb.params(t, "id"))
	if err != nil && failure.CodeOf(err) != failure.DestinationRejectedRecords {
		t.Fatalf("run: %v", err)
	}
	if r.Written != 1 || r.Rejected != 3 {
		t.Fatalf("written %d, rejected %d; want 1 and 3", r.Written, r.Rejected)
	}
	rejected, err := tb.store.LedgerList(context.Background(), "s1", store.LedgerRejected, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rejected) != 3 || !strings.Contains(rejected[0].Message, `the identity column "id" is null or empty`) {
		t.Fatalf("rejected entries %+v, want the 3 rows without an identity", rejected)
	}
	// Each is named by its line, as a row the file source cannot read is:
	// "record 1 of the page" left a person to count pages (an independent
	// check, 2026-12-06).
	var lines []string
	for _, e := range rejected {
		line, _, _ := strings.Cut(e.Message, ":")
		lines = append(lines, line)
	}
	slices.Sort(lines)
	if got := strings.Join(lines, ","); got != "line 2,line 3,line 4" {
		t.Fatalf("rejected rows named %q, want line 2,line 3,line 4", got)
	}
}
