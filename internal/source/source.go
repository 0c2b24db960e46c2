// Package source defines what oncesync reads from: a source hands out pages of
// records at opaque cursors. Connectors live in sub-packages (source/file, ...)
// and each passes the shared acceptance suite in source/sourcetest.
package source

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// DefaultLookback is cursor_lookback when a keyset source (PostgreSQL,
// MySQL) leaves it unset: how far before the last row read the next run
// starts reading again, for rows whose transactions committed after a pass
// read past their cursor value (docs/guide.md#rows-committed-late). Five
// minutes covers a slow transaction and an application server's clock a
// little behind the database's; the rows of the window that did not change
// are only looked up in the ledger, never written again.
const DefaultLookback = 5 * time.Minute

// DefaultLookbackValues is cursor_lookback_values when a keyset source
// leaves it unset: for an integer cursor_column (a sequence, a version
// counter), how many values before the last row read the next run starts
// reading again. A sequence value is handed out when a transaction writes
// its row and becomes visible when it commits, so a row can appear below
// one already read, as a time can (docs/guide.md#rows-committed-late).
const DefaultLookbackValues = 1000

// IntLookback is the decimal integer text moved back by n values and one
// more (so that a row at the window's edge is not skipped on a tie of
// identity). start is true when that falls below least, the type's
// smallest value: the next pass then reads from the start of the source.
func IntLookback(text string, n, least int64) (back string, start bool, ok bool) {
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 {
		return "", false, false
	}
	if v < least+n+1 { // v-n-1 < least, without overflow
		return "", true, true
	}
	return strconv.FormatInt(v-n-1, 10), false, true
}

// Record is one row read from a source.
type Record struct {
	// Fields maps column names to values. CSV values are strings; JSONL values
	// are what encoding/json decodes with UseNumber (string, json.Number, bool,
	// nil, maps, slices), so large ids keep their digits. PostgreSQL and
	// Parquet values are of the same kinds plus int64 (timestamps as RFC
	// 3339 text, floats and decimals as json.Number).
	Fields map[string]any
	// Invalid, when set, says why this record could not be read (a line
	// that does not parse, a value of a type the source cannot map), with
	// its place ("line 12: ...") and never its values. The record is
	// rejected, like one the destination refuses, and the run goes on
	// (docs/guide.md#the-ledger-and-its-retention); Fields may be nil.
	Invalid string
	// Line is the record's first line in its file (csv, jsonl), for the
	// messages that name it; 0 where a source has no lines.
	Line int64
}

// Page is the records read at one cursor.
type Page struct {
	// Cursor is the cursor this page was read at ("" is the start of the source).
	Cursor string
	// Records are the page's records, in source order; a record's index is its
	// position on the page (part of its delivery key).
	Records []Record
	// Next is the cursor to read the following page at. When End is true, Next is
	// the cursor the sync's next run starts from ("" = read everything again).
	Next string
	// End reports that the source has no records after this page.
	End bool
}

// Source reads pages. A Source is used by one run at a time and may keep state
// (an open file) between sequential ReadPage calls.
type Source interface {
	// ID is a stable name of what is read (type and location, no secrets); it is
	// part of every delivery key.
	ID() string
	// ReadPage reads up to size records at cursor.
	ReadPage(ctx context.Context, cursor string, size int) (Page, error)
	Close() error
}

// CursorKind is implemented by a keyset source (PostgreSQL, MySQL): once it
// has read a page, it names the column its cursor follows, that column's
// type, and the lookback that moves the cursor back, in words such as
// "cursor_lookback (5m0s)" or "cursor_lookback_values (1000)" ("" when none
// applies to the type, or it is off): `oncesync check` says whether rows
// committed late are read again (docs/guide.md#rows-committed-late).
type CursorKind interface {
	CursorKind() (column, typ, window string)
}

// Refetcher is implemented by a source that can read rows again by their
// identity: a keyset source (PostgreSQL, MySQL) whose cursor has moved past
// a row the destination rejected re-reads it this way on later runs, so the
// row is retried until it is delivered (docs/guide.md#the-ledger-and-its-retention). A file source, which is
// read whole on every run, needs no Refetcher.
type Refetcher interface {
	// ReadIdentities returns the rows whose identity column (as the sync
	// declares it; mapping.Identity renders its value) is one of ids, in
	// one snapshot, in any order; ids matching no row are left out (the row
	// was deleted). identity is the column name.
	ReadIdentities(ctx context.Context, identity string, ids []string) ([]Record, error)
}

// NullKeyer is implemented by a keyset source whose key columns (the
// cursor_column and the identity) may hold NULL, which keyset pagination
// cannot read past: a run fails at the end of its pass with ErrInvalid and
// holds back that pass's last page. `oncesync check` asks, so that a NULL
// is found before a run that stops at it.
type NullKeyer interface {
	// NullKeys reports whether some row holds a NULL in a key column, and
	// names the columns.
	NullKeys(ctx context.Context) (columns string, found bool, err error)
}

// Snapshotter is implemented by a source that can say which version of its
// data it would read: equal snapshots, equal data. A partitioned run pins
// its source's snapshot at the checkpoint barrier, and each partition
// checks it again before it writes (docs/guide.md#the-checkpoint-barrier);
// a source without one cannot be partitioned.
type Snapshotter interface {
	// Snapshot returns the inputs the snapshot hash is taken over. Its
	// errors wrap ErrUnavailable (the data could not be read) or ErrInvalid
	// (the query that versions it is wrong).
	Snapshot(ctx context.Context) (map[string]any, error)
}

// Slice is one partition of a partitioned sync's rows: those whose
// identity column, rendered as mapping.Identity renders it, hashes to
// partition K (1-based) of N by FNV-1a 64 mod N (partition.Of).
type Slice struct {
	Identity string
	K, N     int
}

// Slicer is implemented by a source that can read only a slice's rows, so
// that each partition of a partitioned sync reads its own share rather than
// the whole source (docs/guide.md#which-rows-a-partition-reads).
type Slicer interface {
	// ReadSlice is ReadPage restricted to the rows of slice, or to a
	// superset of them (the source's filter may be cheaper than the
	// hash): the caller still keeps only the slice's records. Its cursors
	// are ReadPage's: either method resumes at a cursor of the other, and
	// a page is full (End false) or the last of the slice (End true).
	ReadSlice(ctx context.Context, slice Slice, cursor string, size int) (Page, error)
}

// Progressor is implemented by a source that can say how far a cursor is
// through it: for a progress bar with a real total, and to show a cursor
// to people ("after record 2,000 of contacts.csv").
type Progressor interface {
	// Progress locates cursor ("" = the start of the source).
	Progress(ctx context.Context, cursor string) (Position, error)
}

// Position is where a cursor is in a source.
type Position struct {
	// Done of Total, in bytes when InBytes, else in records; Total is 0
	// when the source does not know it.
	Done, Total int64
	InBytes     bool
	// Where says it in words, without secrets or record values.
	Where string
}

// FailedOnData stands for the message of a data error (a value that does
// not parse or fit): such messages quote the value.
const FailedOnData = "the query failed on a value of the data"

// RaisedByQuery stands for the message of an error a function the query
// calls raised itself (PostgreSQL's RAISE, MySQL's SIGNAL): its author's
// text may quote the row it met, so it is never kept or shown.
const RaisedByQuery = "a function the query calls raised an error; its message is not kept, as it may quote the row's values: run the query by hand to read it"

// FindWith is the clause that gives a person the query q finding the rows
// a SQL source's message is about (the rows' values are theirs to read,
// not the message's); "" without one.
func FindWith(q string) string {
	if q == "" {
		return ""
	}
	return " (find them with: " + q + ")"
}

// Columner is a source whose records all have the same columns, known once
// a page was read (a CSV file's header): a run that read no record checks
// the mapping against them, so that an export with the wrong header, or
// none, fails instead of succeeding with nothing, run after run.
type Columner interface {
	// Columns are the columns of the source as last read: nil when not
	// known, empty for a file without even a header.
	Columns() []string
}

// Sentinel errors; connectors wrap them with %w so the runner can map them to
// failure codes.
var (
	// ErrUnavailable: the source cannot be reached or opened (retryable).
	ErrUnavailable = errors.New("source unavailable")
	// ErrAuth: the source refused the credentials or the access (a SaaS
	// API's token, a database user's password or grants); permanent until
	// the credentials change.
	ErrAuth = errors.New("source refused the credentials")
	// ErrInvalid: the data or the query is malformed (permanent).
	ErrInvalid = errors.New("source data or query invalid")
	// ErrChanged: the cursor no longer matches the source (the file changed).
	ErrChanged = errors.New("source changed since the cursor was saved")
	// ErrBadCursor: the cursor string cannot be decoded.
	ErrBadCursor = errors.New("cursor cannot be decoded")
)

// NoAnswerError is a source's setup that ran out of its time limit: the
// source was reached but did not answer (a lock another session holds on
// the table, an overloaded server). It is ErrUnavailable, retryable: the
// definition is not wrong, and "context deadline exceeded" alone read as
// an invalid sync definition.
type NoAnswerError struct {
	Err   error         // the source's error, ending with the context's
	After time.Duration // the limit
	Hint  string        // what may hold it, and how to see it
}

func (e *NoAnswerError) Error() string {
	msg := strings.TrimSuffix(e.Err.Error(), ": "+context.DeadlineExceeded.Error())
	return msg + ": no answer within " + e.After.String() + ": " + e.Hint
}

func (e *NoAnswerError) Unwrap() []error { return []error{e.Err, ErrUnavailable} }

// ReadHint says what may hold a read of a source that goes unanswered.
const ReadHint = "a lock another session holds on a table the source reads (an ALTER TABLE or LOCK TABLE, running or waiting, " +
	"or a transaction left open), a slow query or server, a network that drops packets, a network or FUSE filesystem " +
	"that stopped answering (a file source's), or an API's rate limit; " +
	"a query that needs longer needs a larger source.timeout"

// ReadWithin runs read, one read of the source id named by what ("read a
// page"), under limit (the sync's source.timeout; 0: none), timed on clk
// (nil: the wall clock).
// A read the limit cuts is a *NoAnswerError (unavailable, retryable):
// without it a read waiting on another session's lock, or on a connection
// whose packets are dropped, held its run and the sync's lease for as long
// as the lock or the kernel's keepalive lasted.
func ReadWithin(ctx context.Context, clk clock.Clock, limit time.Duration, id, what string, read func(context.Context) error) error {
	if limit <= 0 {
		return read(ctx)
	}
	if clk == nil {
		clk = clock.Real{}
	}
	rctx, cancel := clock.WithDeadline(ctx, clk, clk.Now().Add(limit))
	defer cancel()
	err := read(rctx)
	if err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return &NoAnswerError{Err: fmt.Errorf("%s: %s: %w", id, what, context.DeadlineExceeded), After: limit, Hint: ReadHint}
	}
	return err
}

// ConnectError marks err as met while connecting: before the server
// answered as the database it should be (its greeting, its handshake).
// Its text is err's.
type ConnectError struct{ Err error }

func (e *ConnectError) Error() string { return e.Err.Error() }
func (e *ConnectError) Unwrap() error { return e.Err }

// ContextError is ctxErr, the context's error a database source met while
// doing what, named by the source's id; a *ConnectError while connecting,
// so that SetupTimedOut can tell the steps apart.
func ContextError(id, what string, ctxErr error) error {
	err := fmt.Errorf("%s: %s: %w", id, what, ctxErr)
	if what == "connect" {
		return &ConnectError{Err: err}
	}
	return err
}

// SetupHints say what may hold a database source's setup that ran out of
// time: Connect while connecting (a *ConnectError), Query once connected.
type SetupHints struct{ Connect, Query string }

// SetupTimedOut is err as a *NoAnswerError when limited, the context a
// source's setup ran under with limit after, ran out while its parent did
// not (with hints' Connect or Query words); err otherwise.
func SetupTimedOut(parent, limited context.Context, err error, after time.Duration, hints SetupHints) error {
	if err == nil || parent.Err() != nil || !errors.Is(limited.Err(), context.DeadlineExceeded) {
		return err
	}
	hint := hints.Query
	var ce *ConnectError
	if errors.As(err, &ce) {
		hint = hints.Connect
	}
	return &NoAnswerError{Err: err, After: after, Hint: hint}
}
