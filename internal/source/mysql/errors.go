package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"

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

// scrub returns msg without the password (defence in depth: the driver does
// not put passwords in its errors, but a network message must never leak one).
func (s *Source) scrub(msg string) string {
	if s.password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, s.password, "xxxxx")
}

// transientErrors are server errors a retry can cure.
var transientErrors = map[uint16]bool{
	1037: true, 1038: true, 1041: true, // out of memory
	1040: true, 1203: true, // too many connections, max_user_connections
	1053: true,                                                 // server shutdown in progress
	1129: true,                                                 // host blocked by connection errors
	1152: true, 1153: true, 1154: true, 1155: true, 1156: true, // network
	1157: true, 1158: true, 1159: true, 1160: true, 1161: true, // network
	1205: true, 1213: true, // lock wait timeout, deadlock
	1317: true, // query interrupted
	1927: true, // connection killed (MariaDB)
	1969: true, // max_statement_time exceeded (MariaDB)
	3024: true, // max_execution_time exceeded (MySQL)
	4031: true, // disconnected by the server for inactivity (MySQL)
}

// authErrors are the server's refusals of the account or of its access to
// the data: only new credentials or grants cure them (source_auth).
var authErrors = map[uint16]bool{
	1044: true, // access denied to the database
	1045: true, // access denied (wrong user or password)
	1049: true, // the dsn's database does not exist (MySQL says 1044 to a user without access to it)
	1142: true, // command denied on a table (no SELECT grant)
	1143: true, // command denied on a column
	1227: true, // a privilege is missing
	1251: true, // the account's authentication plugin is not one the client speaks
	1370: true, // EXECUTE denied on a routine the query calls
	1698: true, // access denied to an account without a password (MariaDB, unix_socket)
	1820: true, // the password must be reset before any statement
	1862: true, // the password has expired
	3118: true, // the account is locked (MySQL)
	3955: true, // the account is blocked after failed logins (MySQL)
	4151: true, // the account is locked (MariaDB)
}

// authDriverErrors are the driver's refusals of the account's
// authentication method, which a retry cannot cure either.
var authDriverErrors = []error{mysqldrv.ErrCleartextPassword, mysqldrv.ErrNativePassword, mysqldrv.ErrOldPassword, mysqldrv.ErrUnknownPlugin}

// dataErrors are errors whose messages quote row values (`Truncated
// incorrect DOUBLE value: 'ada@example.com'`); only their numbers are kept.
var dataErrors = map[uint16]bool{
	1062: true, 1264: true, 1265: true, 1292: true, 1366: true, 1367: true,
	1406: true, 1411: true, 1441: true, 1525: true, 1586: true, 3140: true, 4025: true,
}

// classify wraps err, met while doing what, with the source sentinel a runner
// maps to a failure code:
//   - the context's error when ctx is done (not a source failure);
//   - source.ErrAuth for refused credentials and missing grants (wrong
//     password, no SELECT on the table, expired password, locked account),
//     with the server's message, error number and SQLSTATE;
//   - source.ErrInvalid for the server's other refusals that a retry cannot
//     cure (syntax, unknown table or column, data errors), likewise;
//   - source.ErrUnavailable for everything else (network, server shutting
//     down, timeouts, too many connections, deadlocks).
//
// Messages of data errors (SQLSTATE classes 22 and 23, and the numbers of
// dataErrors) and of SIGNALs (class 45, error 1644) are replaced by their
// number, as they can quote row values.
func (s *Source) classify(ctx context.Context, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return source.ContextError(s.id, what, ctxErr)
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		state := strings.TrimRight(string(me.SQLState[:]), "\x00")
		class := state[:min(2, len(state))]
		msg := me.Message
		switch {
		case class == "22" || class == "23" || dataErrors[me.Number]:
			msg = source.FailedOnData
		case class == "45" || me.Number == 1644:
			// SIGNAL in a function or procedure the query calls: its
			// text is the author's, and may quote the row it met.
			msg = source.RaisedByQuery
		}
		detail := fmt.Sprintf("%s (error %d", msg, me.Number)
		if state != "" {
			detail += ", SQLSTATE " + state
		}
		safe := &safeError{msg: s.scrub(detail + ")"), err: err}
		sentinel := source.ErrInvalid
		switch {
		case transientErrors[me.Number] || class == "08" || class == "40":
			sentinel = source.ErrUnavailable
		case authErrors[me.Number] || class == "28":
			sentinel = source.ErrAuth
		}
		return fmt.Errorf("%s: %s: %w: %w", s.id, what, sentinel, safe)
	}
	for _, auth := range authDriverErrors {
		if errors.Is(err, auth) {
			return fmt.Errorf("%s: %s: %w: %w", s.id, what, source.ErrAuth, &safeError{msg: s.scrub(err.Error()), err: err})
		}
	}
	if errors.Is(err, source.ErrInvalid) || errors.Is(err, source.ErrChanged) ||
		errors.Is(err, source.ErrBadCursor) || errors.Is(err, source.ErrUnavailable) {
		return fmt.Errorf("%s: %s: %w", s.id, what, err)
	}
	safe := &safeError{msg: s.scrub(err.Error()), err: err}
	return fmt.Errorf("%s: %s: %w: %w", s.id, what, source.ErrUnavailable, safe)
}
