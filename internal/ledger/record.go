package ledger

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// Record is a ledger entry as a person reads it: a record that needs them
// (rejected, in doubt), named by the sync's identity, with the reason. The
// CLI (`oncesync records`), the sync and run pages and the API show it.
type Record struct {
	Identity string    `json:"identity,omitempty"` // empty for entries that predate identities
	State    string    `json:"state"`              // "rejected", "in doubt", "removed" or "settled"
	Reason   string    `json:"reason"`
	RunID    int64     `json:"run"`
	At       time.Time `json:"at"` // when the delivery was claimed
	Attempts int       `json:"attempts"`
	Key      string    `json:"key"` // the delivery key (a hash; no personal data)
}

// Record states as Record.State shows them.
const (
	RecordRejected = "rejected"
	RecordInDoubt  = "in doubt"
	RecordRemoved  = "removed"
	RecordSettled  = "settled"
)

// How a write in doubt was settled (store.Settlement.How;
// docs/guide.md#the-ledger-and-its-retention).
const (
	SettledLanded     = "landed"            // read back: it had landed; not sent again
	SettledResent     = "resent"            // read back: not there; sent again
	SettledIdempotent = "resent_idempotent" // sent again under its idempotency key
	// SettledChanged: an earlier value's write in doubt, on a destination
	// not read back, whose row changed since: its new values were sent
	// under their own key once settings.in_doubt_grace had passed.
	SettledChanged   = "resent_changed"
	SettledDelivered = "person_delivered" // a person marked it delivered
	SettledToResend  = "person_resend"    // a person marked it to send again
	// SettledRemovedAgain: a mirror's removal in doubt, sent again.
	SettledRemovedAgain = "removed_again"
	// SettledRemovalHeld: a mirror's removal in doubt of an identifier a
	// row holds again, not asked for again.
	SettledRemovalHeld = "removal_held"
)

// settledReasons are the settled records' reasons, by how.
var settledReasons = map[string]string{
	SettledLanded:     "in doubt (its write's answer was lost, or the run that claimed it stopped first); read back from the destination, it had landed, so it was not sent again",
	SettledResent:     "in doubt (its write's answer was lost, or the run that claimed it stopped first); read back from the destination, it was not there, so it was sent again",
	SettledIdempotent: "in doubt (its write's answer was lost, or the run that claimed it stopped first); sent again with the same idempotency key, which the destination applies once",
	SettledChanged: "an earlier value's write was in doubt (its answer was lost, or the run that claimed it stopped first) and the row " +
		"changed since; its new values were sent under their own idempotency key once settings.in_doubt_grace had passed since that write, " +
		"so that write, if the destination applied it late, came first",
	SettledDelivered: "in doubt; a person marked it delivered (the sync's audit log names who)",
	SettledToResend:  "in doubt; a person marked it to send again (the sync's audit log names who)",
	SettledRemovedAgain: "a mirror's removal in doubt (its answer was lost, or the run that claimed it stopped first); " +
		"asked for again, which removes the record at most once",
	SettledRemovalHeld: "a mirror's removal in doubt (its answer was lost, or the run that claimed it stopped first); " +
		"a row holds the record's identifier again and was written after it, so it was not asked for again",
}

// Settlement is how the write in doubt of the record identity was settled,
// as a mark carries it (store.LedgerFinish.Settled).
func Settlement(identity, how string) *store.Settlement {
	return &store.Settlement{Identity: encodeIdentity(identity), How: how}
}

// SettledRecord is a recorded settlement as a Record (state "settled").
func SettledRecord(e store.SettledEntry) Record {
	r := Record{State: RecordSettled, RunID: e.RunID, At: e.At.UTC(), Key: e.Key, Reason: settledReasons[e.How]}
	if id, ok := decodeIdentity(e.Identity); ok {
		r.Identity = id
	}
	if r.Reason == "" {
		r.Reason = "settled: " + e.How
	}
	return r
}

// Settled is syncID's settled records, newest first, at most limit (0: all).
func Settled(ctx context.Context, st interface {
	LedgerSettled(ctx context.Context, syncID string, limit int) ([]store.SettledEntry, error)
}, syncID string, limit int) ([]Record, error) {
	es, err := st.LedgerSettled(ctx, syncID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(es))
	for i, e := range es {
		out[i] = SettledRecord(e)
	}
	return out, nil
}

// Matches says whether r answers a search of the records lists (the
// sync's records page's q, `oncesync records --search`): a case-insensitive
// part of its identity, or the start of its delivery key. "" matches all.
func (r Record) Matches(q string) bool {
	q = strings.ToLower(strings.TrimSpace(q))
	return q == "" || strings.Contains(strings.ToLower(r.Identity), q) || strings.HasPrefix(r.Key, q)
}

// RemovedReason is the reason of every removed record.
const RemovedReason = "its source row is gone: removed from the destination by the sync's write_mode mirror"

// RemovedRecord is a slot's complete entry as a removed Record; ok is
// false for a slot whose record was not removed.
func RemovedRecord(e store.LedgerEntry) (Record, bool) {
	s, ok := DecodeSlot(e, true)
	if !ok {
		return Record{}, false
	}
	id, ok := RefRemoved(s.Ref)
	if !ok {
		return Record{}, false
	}
	return Record{Identity: id, State: RecordRemoved, Reason: RemovedReason, RunID: e.RunID, At: e.CompletedAt.UTC(), Key: e.Key}, true
}

// InDoubtReason is the reason of every in-doubt record: the entry holds no
// message of its own.
const InDoubtReason = "the write's outcome is unknown (its run stopped between the destination call and recording the answer); the next run reads the destination back where it can, or settle it on the run page"

// RecordOf is e as a Record.
func RecordOf(e store.LedgerEntry) Record {
	r := Record{State: string(e.State), RunID: e.RunID, At: e.ClaimedAt.UTC(), Attempts: e.Attempts, Key: e.Key}
	if id, ok := EntryIdentity(e); ok {
		r.Identity = id
	}
	switch e.State {
	case store.LedgerInDoubt:
		r.State, r.Reason = RecordInDoubt, InDoubtReason
	default:
		r.Reason = e.Message
		if r.Reason == "" {
			r.Reason = "refused by the destination (no message)"
		}
	}
	return r
}

// Shown is what names r to a person: its identity, else its key.
func (r Record) Shown() string {
	if r.Identity != "" {
		return r.Identity
	}
	return "key " + r.Key
}

// RecordCSVHeader and CSVRow are a Record's CSV form (the CLI's --format
// csv and the pages' download).
var RecordCSVHeader = []string{"identity", "state", "reason", "run", "at", "attempts", "key"}

// CSVRow is r in RecordCSVHeader's order.
func (r Record) CSVRow() []string {
	return []string{r.Identity, r.State, r.Reason, strconv.FormatInt(r.RunID, 10), r.At.Format(time.RFC3339), strconv.Itoa(r.Attempts), r.Key}
}

// RetryClaimResult is the Result a run claims a rejected record's key with
// when it sends it again: the refusal's own form (RejectedResult), so that
// while the claim is pending (the page on the wire, or its run dead before
// recording the answer) the record is still listed as refused
// (ListRefused), not gone from every list until the next run.
func RetryClaimResult(slot, identity string) string { return RejectedResult(slot, identity) }

// RetryAcceptedMessage is the Message of an accepted entry of a refused
// record sent again (its Result names the process): the refusal's form, so
// that while the destination processes the import the record is still
// listed as refused (ListRefused).
func RetryAcceptedMessage(slot, identity string) string { return RejectedResult(slot, identity) }

// RetryingReason is the reason of a refused record a run is sending again.
func RetryingReason(runID int64) string {
	return "refused before; run " + strconv.FormatInt(runID, 10) + " is trying it again (its answer is not recorded yet)"
}

// Lister is the part of the store ListRefused reads.
type Lister interface {
	LedgerList(ctx context.Context, syncID string, state store.LedgerState, limit int) ([]store.LedgerEntry, error)
}

// List is st's entries of syncID in state, at most limit (0: all), the
// refused records a run is sending again counted as rejected (ListRefused):
// what every list and count of the records a person must look at reads.
func List(ctx context.Context, st Lister, syncID string, state store.LedgerState, limit int) ([]store.LedgerEntry, error) {
	if state == store.LedgerRejected {
		return ListRefused(ctx, st, syncID, limit)
	}
	return st.LedgerList(ctx, syncID, state, limit)
}

// ListRefused lists syncID's refused records: its rejected entries, then
// the pending ones a run claimed to send a refused record again
// (RetryClaimResult) and the accepted ones whose import the destination is
// processing (RetryAcceptedMessage), shown rejected with RetryingReason, at
// most limit of each (0: all). Every list and count of rejected records
// reads it, so a record a person must look at stays listed while it is
// retried.
func ListRefused(ctx context.Context, st Lister, syncID string, limit int) ([]store.LedgerEntry, error) {
	out, err := st.LedgerList(ctx, syncID, store.LedgerRejected, limit)
	if err != nil {
		return nil, err
	}
	pending, err := st.LedgerList(ctx, syncID, store.LedgerPending, 0)
	if err != nil {
		return nil, err
	}
	accepted, err := st.LedgerList(ctx, syncID, store.LedgerAccepted, 0)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, e := range slices.Concat(pending, accepted) {
		refusal := e.Result
		if e.State == store.LedgerAccepted {
			refusal = e.Message
		}
		if !strings.HasPrefix(refusal, "r1.") || (limit > 0 && n == limit) {
			continue
		}
		// The refusal's form names the record's identity (RecordOf).
		e.State, e.Result, e.Message = store.LedgerRejected, refusal, RetryingReason(e.RunID)
		out = append(out, e)
		n++
	}
	return out, nil
}
