// Package failure is oncesync's one catalog of user-visible failures (docs/recovery.md).
//
// Every failure a user can see carries a Code from this catalog: one sentence of
// what happened, one of what to do next, who owns the fix, and whether a retry
// can help. docs/recovery.md has one section per code (checked by a test).
package failure

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Code identifies one entry of the catalog.
type Code string

// Owner says who has to act on a failure.
type Owner string

const (
	// OwnerYou is the owner of the sync (its definition, its data, its credentials).
	OwnerYou Owner = "you"
	// OwnerOperator is whoever runs oncesync (its machines, store, Redis, network).
	OwnerOperator Owner = "operator"
)

// The catalog codes (docs/recovery.md).
const (
	LeaseLost                  Code = "lease_lost"
	AlreadyRunning             Code = "already_running"
	Interrupted                Code = "interrupted"
	DestinationAuth            Code = "destination_auth"
	DestinationRejectedRecords Code = "destination_rejected_records"
	DestinationUnavailable     Code = "destination_unavailable"
	DestinationRateLimited     Code = "destination_rate_limited"
	SourceUnavailable          Code = "source_unavailable"
	SourceQueryInvalid         Code = "source_query_invalid"
	SourceAuth                 Code = "source_auth"
	InvalidSyncDefinition      Code = "invalid_sync_definition"
	CursorOlderThanLedger      Code = "cursor_older_than_ledger"
	SourceChangedDuringRun     Code = "source_changed_during_run"
	CheckpointMismatch         Code = "checkpoint_mismatch"
	PartitionsUnfinished       Code = "partitions_unfinished"
	ConfigDrift                Code = "config_drift"
	RecordsInDoubt             Code = "records_in_doubt"
	MirrorRemovalsRefused      Code = "mirror_removals_refused"
	StoreUnavailable           Code = "store_unavailable"
	TooManyOpenFiles           Code = "too_many_open_files"
	CircuitBreakerTripped      Code = "circuit_breaker_tripped"
	SyncPaused                 Code = "sync_paused"
	AlertUndelivered           Code = "alert_undelivered"
	InvalidInvocation          Code = "invalid_invocation"
	Internal                   Code = "internal_error"
)

// Entry is one row of the catalog.
type Entry struct {
	Code         Code
	WhatHappened string
	NextStep     string
	Owner        Owner
	Retryable    bool
}

var catalog = map[Code]Entry{
	LeaseLost: {LeaseLost,
		"The run lost its slot part-way through and stopped to avoid writing twice.",
		"Nothing to undo: the next run resumes from the last checkpoint. If it recurs, check that workers are not paused for longer than the lease TTL and that the store and Redis are reachable.",
		OwnerOperator, true},
	AlreadyRunning: {AlreadyRunning,
		"Another run of this sync was already in progress",
		"Nothing to do: the next scheduled run starts normally. Use `oncesync status --config FILE SYNC` to see the run that holds the slot.",
		OwnerOperator, false},
	Interrupted: {Interrupted,
		"The run's worker was stopped before the run finished; the sync's cursor stays at the run's last checkpoint.",
		"Nothing to undo: the next run of the sync resumes from the last checkpoint. If runs are stopped often, check how the workers are deployed and shut down.",
		OwnerOperator, true},
	DestinationAuth: {DestinationAuth,
		"The destination refused oncesync's credentials, or the account lacks access.",
		"Check the credentials in the sync's destination (Brevo or Klaviyo `api_key`, HubSpot `token`, webhook `headers`) and the environment variables they come from, and that the account is in good standing (its plan, credits and permissions: the detail says what the destination answered), then run the sync again.",
		OwnerYou, false},
	DestinationRejectedRecords: {DestinationRejectedRecords,
		"The destination refused every record of a page, so the mapping is most likely wrong.",
		"Compare the sync's mapping with the fields the destination requires, fix the mapping or the source data, then run the sync again.",
		OwnerYou, false},
	DestinationUnavailable: {DestinationUnavailable,
		"The destination did not answer or answered with a server error.",
		"Nothing to undo: each call was already retried with backoff, and the next run resumes from the last checkpoint. If it persists, check the destination's status page and the network from the workers.",
		OwnerOperator, true},
	DestinationRateLimited: {DestinationRateLimited,
		"The destination kept answering 'too many requests' after oncesync waited, or asked it to wait more than a minute.",
		"Nothing to undo: the next run resumes from the last checkpoint. If it recurs, lower the destination's `rate_limit` or `concurrency`, or raise the destination plan's limit.",
		OwnerOperator, true},
	SourceUnavailable: {SourceUnavailable,
		"The source could not be read (file missing or unreadable, database unreachable).",
		"Check that the source file or database is reachable from the workers, then run the sync again; it resumes from the last checkpoint.",
		OwnerOperator, true},
	SourceQueryInvalid: {SourceQueryInvalid,
		"The source refused the sync's query or the data does not parse.",
		"Fix what the detail names in the sync's source (its query, table, columns or file format; a Shopify `shop_url` or `api_version`), then run the sync again.",
		OwnerYou, false},
	SourceAuth: {SourceAuth,
		"The source refused oncesync's credentials, or they lack access to the data.",
		"Check the credentials in the sync's source (a PostgreSQL or MySQL `dsn`'s user, password and grants; Shopify `access_token` and its `read_customers` scope) and the environment variables they come from, then run the sync again.",
		OwnerYou, false},
	InvalidSyncDefinition: {InvalidSyncDefinition,
		"The sync's definition is invalid.",
		"Fix the problem named in the lines before this one or in the run's detail (`oncesync validate --config FILE` lists every problem in the file; `oncesync check --config FILE SYNC` also reads the source's columns and the destination's fields), then run the sync again.",
		OwnerYou, false},
	CursorOlderThanLedger: {CursorOlderThanLedger,
		"A page left in doubt is older than the ledger's retention, so settling it could write its records twice.",
		"Check the destination for those records, then set `allow_rewrite_after_retention: true` on the sync for one run, then remove it.",
		OwnerYou, false},
	SourceChangedDuringRun: {SourceChangedDuringRun,
		"The source changed since the saved cursor was taken, so the saved position no longer points at the same data.",
		"Nothing was written from the changed view. With an `identity` column the next run reads the source from its start by itself and the ledger skips rows already delivered; without one, run the sync again with `--reset-cursor` (rows after the change may then be written again).",
		OwnerYou, false},
	CheckpointMismatch: {CheckpointMismatch,
		"Another holder kept the checkpoint barrier at another snapshot of the inputs through every retry, so the work was not run and was parked in the dead-letter list.",
		"Find why the inputs differ (`oncesync deadletter list --config F` shows both tokens and both snapshots), make every job that checks the barrier see the same inputs, then run the command that waited on it again and mark the entry done with `oncesync deadletter requeue --config F ID`.",
		OwnerYou, false},
	PartitionsUnfinished: {PartitionsUnfinished,
		"Some partitions of the run will never finish: their jobs were cancelled, discarded after their last attempt, or are missing from the queue.",
		"Nothing to undo: every partition resumes from its own checkpoint in the next run. Fix what stopped the partitions named in the run's detail (River's UI at /riverui/ shows their jobs' errors), then let the next run start or queue one from the sync page.",
		OwnerOperator, true},
	ConfigDrift: {ConfigDrift,
		"The worker that took the run has another definition of the sync than the process that queued it (their config files differ), so it wrote nothing.",
		"Give every `serve` and `worker` the same config file (the run's detail names the machine and the parts that differ), then let the next run start or queue one from the sync page.",
		OwnerOperator, false},
	RecordsInDoubt: {RecordsInDoubt,
		"Some records may or may not have reached the destination and it cannot be asked which.",
		"Check at the destination whether those records arrived (`oncesync records --config FILE SYNC --in-doubt` lists them by identity), then settle them on the sync page or through the API; oncesync never resends them by itself.",
		OwnerYou, false},
	MirrorRemovalsRefused: {MirrorRemovalsRefused,
		"A mirror run found more source rows gone than the sync's max_removals allows, so it removed nothing from the destination.",
		"Check that the source is complete (a truncated table or an empty export reads as every row gone); if the removals are intended, run the sync once with `oncesync run --allow-removals`, or raise `max_removals`.",
		OwnerYou, false},
	StoreUnavailable: {StoreUnavailable,
		"oncesync's store (SQLite or PostgreSQL) or Redis could not be reached, or would not serve as oncesync needs (the detail says how).",
		"Restore the store or Redis (or the setting the detail names), then run the sync again; it resumes from the last checkpoint without writing twice.",
		OwnerOperator, true},
	TooManyOpenFiles: {TooManyOpenFiles,
		"The process running the sync had as many files and connections open as its limit allows, so it could not open the source, the destination, the store or Redis.",
		"Raise the open-files limit of oncesync's processes (`ulimit -n`, systemd's `LimitNOFILE`, a container's nofile ulimit) or run fewer workers per process; the queue retries the run, which resumes from the last checkpoint without writing twice.",
		OwnerOperator, true},
	CircuitBreakerTripped: {CircuitBreakerTripped,
		"The sync failed too many times in a row and was paused.",
		"Fix the cause shown by `oncesync status --config FILE SYNC`, then resume the sync with `oncesync resume --config FILE SYNC --by NAME --reason TEXT`.",
		OwnerYou, false},
	SyncPaused: {SyncPaused,
		"The sync is paused by a person, so it does not run.",
		"Resume it with `oncesync resume --config FILE SYNC --by NAME --reason TEXT` once it may run again (`oncesync status --config FILE SYNC` says who paused it and why).",
		OwnerYou, false},
	AlertUndelivered: {AlertUndelivered,
		"A dead-man alert reached no alert sink but the log (the webhook, e-mail or Sentry was down or refused it).",
		"Restore the alert sink named in the detail; the next dead-man check sends the alert again. Meanwhile `oncesync deadman check --config FILE` prints the silences.",
		OwnerOperator, true},
	InvalidInvocation: {InvalidInvocation,
		"The command was given an argument or flag it does not take, or lacks one it needs, so it did nothing.",
		"Run it again as its usage (printed before this line, and by `oncesync run --help`) says; `oncesync status --config FILE` lists the config's sync ids.",
		OwnerYou, false},
	Internal: {Internal,
		"oncesync hit an internal error.",
		"Run the sync again; if it persists, report it with the run id (`oncesync runs --config FILE SYNC`) and the log (`--log-level debug`).",
		OwnerOperator, true},
}

// Lookup returns the catalog entry of code; unknown codes map to Internal.
func Lookup(code Code) Entry {
	if e, ok := catalog[code]; ok {
		return e
	}
	return catalog[Internal]
}

// Known reports whether code is in the catalog.
func Known(code Code) bool { _, ok := catalog[code]; return ok }

// All returns the catalog sorted by code.
func All() []Entry {
	out := make([]Entry, 0, len(catalog))
	for _, e := range catalog {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Error is a user-visible failure. Detail is safe to show (never a secret or a
// record's personal data); Err is the internal cause, kept for errors.Is/As.
type Error struct {
	Code   Code
	Detail string
	Err    error
}

func (e *Error) Error() string {
	msg := string(e.Code)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	// A detail that already quotes its cause (a destination's answer) is
	// not followed by it again.
	if e.Err != nil && !strings.Contains(e.Detail, e.Err.Error()) {
		sep := ": "
		if strings.HasSuffix(e.Detail, ".") {
			sep = " " // a detail that is a sentence ("... writing twice. lease lost")
		}
		msg += sep + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// New returns a user-visible failure with code and a safe detail.
func New(code Code, detail string) *Error { return &Error{Code: code, Detail: detail} }

// Wrap returns a user-visible failure with code wrapping err. When err
// carries advice (an Adviser in its chain), the detail ends with it, so the
// failure says what to do whichever step met the cause.
func Wrap(code Code, err error, format string, args ...any) *Error {
	detail := fmt.Sprintf(format, args...)
	var a Adviser
	if errors.As(err, &a) {
		if adv := a.Advice(); adv != "" && !strings.Contains(detail, adv) {
			detail = withAdvice(detail, adv)
		}
	}
	return &Error{Code: code, Detail: detail, Err: err}
}

// withAdvice ends detail with advice: a sentence of its own after one that
// ends ("... writing twice. The lease ..."), after a colon otherwise.
func withAdvice(detail, advice string) string {
	if !strings.HasSuffix(detail, ".") {
		return detail + ": " + advice
	}
	r, n := utf8.DecodeRuneInString(advice)
	return detail + " " + string(unicode.ToUpper(r)) + advice[n:]
}

// Adviser is a cause that knows what a person should do about it, in words
// safe to show (a full store disk: what to free). The code's catalog entry
// speaks of the kind of failure; the advice of this one.
type Adviser interface {
	Advice() string
}

// OutOfFiles returns err as too_many_open_files when the operating system
// refused this process a file or a socket (EMFILE: the process's open-files
// limit; ENFILE: the machine's) anywhere in its chain, and err itself
// otherwise. Whichever step met the limit (the source's file, a connection to
// the destination, the store or Redis) names its own code, but the cause is
// the process's: owned by the operator, never counted by the circuit breaker
// against the sync (docs/recovery.md#too_many_open_files). The detail stays the
// step's, which says what could not be opened.
func OutOfFiles(err error) error {
	if err == nil || !(errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
		return err
	}
	var fe *Error
	if !errors.As(err, &fe) {
		return &Error{Code: TooManyOpenFiles, Detail: err.Error(), Err: err}
	}
	if fe.Code == TooManyOpenFiles {
		return err
	}
	cause := fe.Err
	if !errors.Is(cause, syscall.EMFILE) && !errors.Is(cause, syscall.ENFILE) {
		cause = err
	}
	return &Error{Code: TooManyOpenFiles, Detail: fe.Detail, Err: cause}
}

// CodeOf returns the catalog code carried by err, or Internal.
func CodeOf(err error) Code {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return Internal
}

// Detail is what a failed run records of err: its own detail, else its
// code's WhatHappened.
func Detail(err error) string {
	var fe *Error
	if errors.As(err, &fe) && fe.Detail != "" {
		return fe.Detail
	}
	return Lookup(CodeOf(err)).WhatHappened
}

// Retryable reports whether a run that failed with err may succeed on retry.
func Retryable(err error) bool { return Lookup(CodeOf(err)).Retryable }

// DocsPath is the path, from the repository root, of the recovery guide: one
// section per catalog code, headed "## <code>".
const DocsPath = "docs/recovery.md"

// Anchor returns the fragment (without '#') of code's section in the recovery
// guide. Codes are lowercase letters and underscores, which GitHub and most
// Markdown renderers keep as they are in heading anchors. Unknown codes get
// internal_error's section, as Lookup does.
func Anchor(code Code) string { return string(Lookup(code).Code) }

// DocsURL returns a link to code's section of the recovery guide. base is the
// guide's URL or path (e.g. a docs site's address); empty means DocsPath. A
// fragment already on base is replaced.
func DocsURL(base string, code Code) string {
	if base == "" {
		base = DocsPath
	}
	base, _, _ = strings.Cut(base, "#")
	return base + "#" + Anchor(code)
}

// LastLine is the last line `oncesync run` prints for a failed run (docs/guide.md#commands).
func LastLine(err error) string {
	e := Lookup(CodeOf(err))
	return fmt.Sprintf("failed: %s: %s Next: %s (owner: %s)", e.Code, e.WhatHappened, e.NextStep, e.Owner)
}
