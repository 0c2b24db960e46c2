package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/source"
)

// safeError carries an error's message with the DSN's password removed, and
// unwraps to the original error (for errors.Is/As).
type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

// scrub returns s without the password (defence in depth: pgx does not put
// passwords in its errors, but a driver or network message must never leak one).
func (s *Source) scrub(msg string) string {
	if s.password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, s.password, "xxxxx")
}

// transientClass reports whether SQLSTATE class c is a failure a retry can cure.
func transientClass(c string) bool {
	switch c {
	case "08", // connection exception
		"40", // transaction rollback (serialization failure, deadlock, recovery conflict)
		"53", // insufficient resources
		"55", // object not in prerequisite state (lock not available)
		"57", // operator intervention (query cancelled by timeout, admin shutdown)
		"58", // system error
		"XX": // internal error
		return true
	}
	return false
}

// recoveryConflict is the SQLSTATE (serialization_failure) of a read a hot
// standby cancelled to replay the primary's changes. The source's reads are
// REPEATABLE READ, READ ONLY transactions, which a primary never fails with
// it: on a source it means a recovery conflict.
const recoveryConflict = "40001"

// recoveryConflictHint follows PostgreSQL's message: what a user of a
// replica changes so the read is not cancelled again
// (docs/guide.md#reading-from-a-replica).
const recoveryConflictHint = "; a hot standby cancels a read that holds back its replay of the primary's changes " +
	"longer than max_standby_streaming_delay: raise it on the standby, turn on hot_standby_feedback, " +
	"or lower the sync's page_size (a page is one read)"

// authState reports whether SQLSTATE code is a refusal of the credentials
// or of their access to the data: only new credentials or grants cure it
// (source_auth), and its next step says where to look.
func authState(code string) bool {
	return strings.HasPrefix(code, "28") || // invalid authorization specification, invalid password
		code == "42501" || // insufficient privilege
		code == "3D000" // the dsn's database does not exist (its name is the dsn's, not the query's)
}

// dataClass reports whether messages of SQLSTATE class c may quote row values
// (`invalid input syntax for type integer: "..."`); only the code is kept.
func dataClass(c string) bool {
	return c == "22" || c == "23" // data exception, integrity constraint violation
}

// classify wraps err, met while doing what, with the source sentinel a runner
// maps to a failure code:
//   - the context's error when ctx is done (not a source failure);
//   - source.ErrAuth for refused credentials and missing privileges
//     (class 28: unknown role, wrong password; 42501: no SELECT on the
//     table) and a dsn naming no database (3D000), with PostgreSQL's
//     message and SQLSTATE;
//   - source.ErrInvalid for PostgreSQL's other refusals that a retry cannot
//     cure (syntax, unknown table or column, data errors), likewise;
//   - source.ErrUnavailable for everything else (network, server shutting
//     down, timeouts, resource limits).
//
// Messages of data errors (classes 22 and 23) and of errors a function
// raised (class P0) are replaced by their SQLSTATE, as they can quote row
// values.
func (s *Source) classify(ctx context.Context, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return source.ContextError(s.id, what, ctxErr)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		class := pe.Code[:min(2, len(pe.Code))]
		msg := pe.Message
		switch {
		case dataClass(class):
			msg = source.FailedOnData
		case class == "P0":
			// RAISE in a function the query calls: its text is the
			// function author's, and may quote the row it met.
			msg = source.RaisedByQuery
		}
		if pe.Code == recoveryConflict {
			msg += recoveryConflictHint
		}
		safe := &safeError{msg: s.scrub(fmt.Sprintf("%s (SQLSTATE %s)", msg, pe.Code)), err: err}
		sentinel := source.ErrInvalid
		switch {
		case transientClass(class):
			sentinel = source.ErrUnavailable
		case authState(pe.Code):
			sentinel = source.ErrAuth
		}
		return fmt.Errorf("%s: %s: %w: %w", s.id, what, sentinel, safe)
	}
	if errors.Is(err, source.ErrInvalid) || errors.Is(err, source.ErrChanged) ||
		errors.Is(err, source.ErrBadCursor) || errors.Is(err, source.ErrUnavailable) {
		return fmt.Errorf("%s: %s: %w", s.id, what, err)
	}
	safe := &safeError{msg: oneLine(s.scrub(err.Error())), err: err}
	return fmt.Errorf("%s: %s: %w: %w", s.id, what, source.ErrUnavailable, safe)
}

// oneLine joins the lines of msg with "; " (a space after a colon), each
// distinct line once: pgx lists every address it tried on a line of its
// own, twice with sslmode=prefer (TLS, then plain), which a run's detail,
// the status and the sync page showed as a broken paragraph.
func oneLine(msg string) string {
	if !strings.Contains(msg, "\n") {
		return msg
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		switch s := b.String(); {
		case s == "":
		case strings.HasSuffix(s, ":"):
			b.WriteString(" ")
		default:
			b.WriteString("; ")
		}
		b.WriteString(l)
	}
	return b.String()
}
