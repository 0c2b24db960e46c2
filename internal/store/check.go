package store

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The argument rules every driver applies before it writes. Each returns a
// plain error saying what is wrong (nil when nothing is); a driver wraps it
// as its invalid-argument error.

// Valid reports whether s is one of the run states.
func (s RunState) Valid() bool {
	switch s {
	case RunQueued, RunRunning, RunSucceeded, RunFailed, RunInterrupted, RunSkipped:
		return true
	}
	return false
}

// CheckFence refuses the arguments no fenced write accepts.
func CheckFence(syncID string, fence int64) error {
	if syncID == "" {
		return fmt.Errorf("sync id is empty")
	}
	if fence < 1 {
		return fmt.Errorf("fence %d (fences start at 1)", fence)
	}
	return nil
}

// CheckUpdate refuses a run UpdateRun cannot save.
func (r Run) CheckUpdate() error {
	if !r.State.Valid() {
		return fmt.Errorf("run state %q", r.State)
	}
	return nil
}

// UpdateArgs are the arguments of both drivers' run update statement, in
// its order ($1..$19): state, attempt, fence, the start (nil: kept), the
// end (nil: stamped now if the state is final, once), whether it is final,
// now, the failure fields, the counters and the id.
func (r Run) UpdateArgs(now time.Time) []any {
	return []any{string(r.State), r.Attempt, r.Fence,
		NullNanos(r.StartedAt),
		NullNanos(r.FinishedAt), r.State.Finished(), now.UnixNano(),
		r.FailureCode, r.FailureDetail,
		r.Read, r.Written, r.Replayed, r.Rejected, r.InDoubt, r.Settled, r.Pages, r.Requests, r.Skipped,
		r.ID}
}

// NullNanos is t in Unix nanoseconds, nil (SQL NULL) for the zero time, as
// the drivers store times.
func NullNanos(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.UnixNano()
	return &n
}

// Check refuses a page row RecordRunPage cannot save.
func (p RunPage) Check() error {
	if p.RunID <= 0 {
		return fmt.Errorf("run page run id %d", p.RunID)
	}
	if p.Page <= 0 {
		return fmt.Errorf("run page number %d", p.Page)
	}
	for _, n := range []int64{p.Read, p.Claimed, p.Sent, p.Replayed, p.Rejected, p.InDoubt, p.Requests} {
		if n < 0 {
			return fmt.Errorf("run page %d of run %d: negative count", p.Page, p.RunID)
		}
	}
	return nil
}

// Check refuses a checkpoint Checkpoint cannot save: its cursor's fence
// arguments, its lease (if any), its run and its page (if any).
func (p CheckpointParams) Check() error {
	if err := CheckFence(p.Cursor.SyncID, p.Cursor.Fence); err != nil {
		return err
	}
	if l := p.Lease; l != nil {
		switch {
		case l.Token == "":
			return fmt.Errorf("checkpoint lease token is empty")
		case l.TTL <= 0:
			return fmt.Errorf("checkpoint lease ttl %s", l.TTL)
		}
	}
	if err := p.Run.CheckUpdate(); err != nil {
		return err
	}
	if p.Page != nil {
		if err := p.Page.Check(); err != nil {
			return err
		}
	}
	for _, pg := range p.MorePages {
		if err := pg.Check(); err != nil {
			return err
		}
	}
	return nil
}

// RenewRefusal says why the lease cur (found: it exists) cannot be renewed
// for token at now, with registered the sync's registered fence; "" when it
// can be.
func RenewRefusal(cur Lease, found bool, token string, now time.Time, registered int64) string {
	switch {
	case !found:
		return "released"
	case cur.Token != token:
		return "taken by " + cur.Holder
	case !cur.ExpiresAt.After(now):
		return "expired at " + cur.ExpiresAt.Format(time.RFC3339Nano)
	case registered > cur.Fence:
		return fmt.Sprintf("fence %d superseded by %d", cur.Fence, registered)
	}
	return ""
}

// LeaseLostError is ErrLeaseLost for syncID, saying why (see RenewRefusal).
func LeaseLostError(syncID, why string) error {
	return fmt.Errorf("sync %q: %w (%s)", syncID, ErrLeaseLost, why)
}

// SortPutSyncs checks a PutSyncs batch (ids non-empty and unique) and returns
// it sorted by id (byte order): every driver writes in that order, so two
// processes publishing the same config take their row locks in one order.
func SortPutSyncs(ps []PutSyncParams) ([]PutSyncParams, error) {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b PutSyncParams) int { return strings.Compare(a.ID, b.ID) })
	for i := range out {
		if out[i].ID == "" {
			return nil, fmt.Errorf("sync id is empty")
		}
		if i > 0 && out[i].ID == out[i-1].ID {
			return nil, fmt.Errorf("sync %q published twice in one batch", out[i].ID)
		}
	}
	return out, nil
}

// FreeFor is Lease.FreeFor of a grant to token at now, with cur the lease
// row it replaces (found: there was one): the time since cur expired, or
// zero when there was none, it is token's own or it has not expired (a
// takeover).
func FreeFor(cur Lease, found bool, token string, now time.Time) time.Duration {
	if !found || cur.Token == token || cur.ExpiresAt.After(now) {
		return 0
	}
	return now.Sub(cur.ExpiresAt)
}
