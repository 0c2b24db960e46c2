// Package postgres reads a PostgreSQL table or query as an oncesync source,
// with keyset pagination (docs/guide.md#commands).
//
// # Paging
//
// A source is a table (Params.Table, e.g. "crm.contacts") or a query
// (Params.Query). Pages are read in the order of (cursor_column, identity):
//
//	SELECT * FROM (<query>) AS src
//	WHERE (src.cursor_column, src.identity) > ($2, $3)
//	ORDER BY src.cursor_column, src.identity LIMIT $1
//
// so a page costs one index range scan, however deep into the source it is
// (index (cursor_column, identity) for a table; a query should let PostgreSQL
// push the condition down to such an index). ORDER BY sorts by the key types'
// default btree operator classes, found through the type; a plain ">" is
// found through the search_path. For a type whose operators are not on it
// (citext installed in a schema "extensions"), ">" would be text's and
// disagree with the order, so the comparison is spelled column by column
// with OPERATOR(schema.>) and OPERATOR(schema.=). Without an identity the
// cursor_column alone orders the rows and MUST be unique: rows sharing the
// value at a page boundary would be skipped (a page reads one row ahead, and
// fails with source.ErrInvalid when that row repeats the page's last key, so
// such a tie is reported, not skipped). With an identity (a primary key) the
// pair must be unique, and ties on cursor_column are broken by it. Keys are
// equal as PostgreSQL compares them, which is not always as they print: in a
// nondeterministic collation 'BOB' and 'bob' are one value, in numeric 1.0
// and 1.00. When the row ahead differs from the last only in such columns,
// the page asks the server, in its snapshot, whether two rows hold the key.
// An empty cursor_column defaults to the identity. Names are exact, as stored
// in the catalog (quoted identifiers: "Contacts" is not contacts).
//
// Each page is read in its own REPEATABLE READ, READ ONLY transaction: a page
// is one consistent snapshot, and the source can never write. Rows are
// streamed from the server, so memory is bounded by the page size, not the
// source size.
//
// # Cursors and incremental runs
//
// A cursor is the (cursor_column, identity) of the last row read, as
// PostgreSQL prints them, with their types (see position); "" is the start.
// The values travel back as parameters in text form, so timestamps, numerics
// and text resume exactly where they stopped. At the end of the source
// Page.End is true and Page.Next is the cursor after the last row, so the next
// run reads only rows whose cursor_column moved past it. With cursor_column
// updated_at (set on every insert and update) and identity the primary key,
// changed rows are re-sent once and unchanged rows never twice. A row that is
// updated or inserted during a run after it was read comes again on a later
// page of the same run (with its new values) or on the next run.
//
// # Rows committed late
//
// A transaction stamps updated_at when it writes (now() is even its start)
// and its rows become visible when it commits: a row committed after a pass
// read past its updated_at has a cursor value below the one the pass ended
// at. So with Params.Lookback set and a time cursor_column (timestamptz,
// timestamp, date), the cursor a pass ends at is the last row's value less
// the lookback (and one microsecond, or one day for a date, so the row at
// the window's edge is not skipped on a tie of identity): the next run reads
// the rows of that window again, and those unchanged since their delivery are
// skipped by the ledger (docs/guide.md#rows-committed-late). With an
// identity, a pass of several pages ends moved back from the largest cursor_column value when
// it began instead, if that is lower: its first page reads it (highSQL) and
// every later page's cursor carries it (the high mark). A row hidden from
// the pass committed after that value was, so within the lookback of its
// stamp the row is within the window, however long the pass read on (or
// how late a stopped pass was resumed). A pass whose last page reads no row (the row ahead of the page before was deleted in
// between) ends moved back from the last row at or before its cursor. A
// transaction that commits more than the lookback after it stamped its
// rows, a key that moved backwards, or a cursor_column of another type is
// not covered: those rows wait until the cursor is reset.
//
// # Rows stamped in the future
//
// A timestamptz cursor_column value ahead of the database's clock (a writer
// whose clock runs ahead) would move the cursor a pass ends at past the
// rows changed before that time, stamped by the clock. With a lookback, the
// cursor a pass ends at is the database's clock at most (now(), the page
// transaction's start), less the lookback: the row ahead is read again at
// every pass (and skipped by the ledger while unchanged) until the clock
// passes it (docs/guide.md#rows-committed-late). A timestamp or date
// without a zone is not clamped: its writers' zone is not known.
//
// Rows whose cursor_column or identity is NULL cannot be paged; rather than
// skip them silently, reaching the end of the source fails with
// source.ErrInvalid while any exist. The check runs in the last page's
// snapshot, once per pass; a table whose key columns are NOT NULL skips it,
// a query pays one EXISTS query at the end of each pass.
//
// # Re-reading rows by identity
//
// The cursor moves past a row the destination rejected, so a later run
// re-reads it by identity (source.Refetcher, docs/guide.md#the-ledger-and-its-retention):
//
//	SELECT * FROM (<query>) AS src WHERE src.identity = ANY($1::<type>[])
//
// with the ids bound as an array of the identity column's own type, so a
// table's index on the column is used (a query should let PostgreSQL push
// the condition down), 1,000 ids per statement, all in one REPEATABLE READ,
// READ ONLY snapshot. See ReadIdentities.
//
// # Reading one partition
//
// ReadSlice (source.Slicer) pages like ReadPage over the rows of one
// partition of a partitioned sync only, or a superset of them: the
// condition source/slicesql builds for the identity column is ANDed to the
// page's WHERE (docs/guide.md#which-rows-a-partition-reads).
//
// # Values
//
// A record's Fields map every result column to a JSON-friendly value
// converted from PostgreSQL's text output:
//
//	NULL                          nil
//	boolean                       bool
//	smallint, integer, bigint, oid int64
//	real, double precision,       json.Number with PostgreSQL's digits
//	numeric                       (scale kept: "12.50"); NaN and ±Infinity as
//	                              the strings "NaN", "Infinity", "-Infinity"
//	timestamp with time zone      RFC 3339 in UTC, nanosecond layout
//	                              ("2024-05-01T10:00:00.123456Z")
//	timestamp without time zone   RFC 3339 without zone ("2024-05-01T10:00:00.5")
//	json, jsonb                   decoded (map[string]any, []any, json.Number...)
//	bytea                         standard base64
//	everything else               PostgreSQL's text: text, varchar, uuid, date
//	                              ("2024-05-01"), time, interval, inet, enums,
//	                              arrays ("{1,2}"; use to_jsonb(col) for JSON)
//
// Out-of-range timestamps (infinity, BC, years past 9999) keep PostgreSQL's
// text. Every session runs with DateStyle ISO, IntervalStyle postgres,
// extra_float_digits 3, bytea_output hex and lc_monetary C (money as
// "$1,234.50", whatever the server's or the role's locale), and TimeZone UTC
// unless the DSN sets one, so the same row reads the same on every worker.
//
// # Errors
//
// An unreachable server, a dropped connection, a timeout or a server shutting
// down wrap source.ErrUnavailable (retryable). Refused credentials and missing
// privileges wrap source.ErrAuth; PostgreSQL's other refusals (syntax,
// unknown table or column, read-only violation) wrap source.ErrInvalid; both
// with PostgreSQL's message and SQLSTATE; data errors
// (classes 22 and 23) keep only the SQLSTATE, as their messages can quote row
// values. A cursor that cannot be decoded wraps source.ErrBadCursor; a cursor
// whose key types no longer match the columns wraps source.ErrChanged. The
// DSN's password appears in no error and not in the ID.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncesync/oncesync/internal/source"
)

// Params configures a Source.
type Params struct {
	// DSN is the connection string (URL or key=value form). Its password is
	// kept out of the ID and every error.
	DSN string
	// Query or Table is what is read (exactly one is set). Table is
	// "name" or "schema.name".
	Query string
	Table string
	// CursorColumn orders the rows and positions cursors. Empty means
	// Identity.
	CursorColumn string
	// Identity is the optional primary-key column that breaks ties on
	// CursorColumn (and keys deliveries, docs/guide.md#what-a-run-does).
	Identity string
	// VersionQuery versions the data for Snapshot (see Version); empty
	// means the default query.
	VersionQuery string
	// MaxRecordBytes bounds a row: the sum of its values' sizes in
	// PostgreSQL's text form. A larger row fails the read with
	// source.ErrInvalid. 0 is DefaultMaxRecordBytes.
	MaxRecordBytes int64
	// Lookback moves the cursor a pass ends at back by this much of a time
	// cursor_column (see "Rows committed late"); 0 reads only rows past
	// the last one read.
	Lookback time.Duration
	// LookbackValues moves it back by this many values of an integer
	// cursor_column (smallint, integer, bigint); 0 is off.
	LookbackValues int64
}

// DefaultMaxRecordBytes is the row limit when Params leave it 0.
const DefaultMaxRecordBytes = 1 << 20

// defaultConnectTimeout bounds a connection attempt when the DSN sets no
// connect_timeout.
const defaultConnectTimeout = 10 * time.Second

// closeTimeout bounds the goodbye to the server on Close and after errors.
const closeTimeout = 5 * time.Second

// Source reads a PostgreSQL table or query. It holds one connection, opened by
// New and reopened on demand after it is lost; it is safe for concurrent use
// (calls are serialised), though a run uses it from one goroutine.
type Source struct {
	cfg      *pgx.ConnConfig
	id       string
	password string
	// from is the relation read: a quoted table name or "(query\n)".
	from string
	// keys are the key column names: cursor_column[, identity].
	keys []string
	// isTable reports a table source (its NOT NULL constraints are checked
	// once, at New).
	isTable bool
	// keysNotNull reports that the catalog forbids NULL in every key column.
	keysNotNull bool
	// identity is Params.Identity; identOID its column's type, as check
	// found it (slice.go's predicates depend on it).
	identity string
	identOID uint32
	// textEqual[k] reports that two values of key k that the column
	// compares equal always print alike (see tieFree), as check found.
	textEqual []bool
	// opSchemas[k] is the schema of key k's comparison operators when a
	// plain ">" would not find them (see operatorSchemas), else "".
	opSchemas []string

	pages               statements // ReadPage's
	nullSQL, versionSQL string
	// findNulls and findTies are the queries a person runs to find the rows
	// that stop keyset pagination ("": a query source, whose text may be long).
	findNulls, findTies string
	highSQL             string        // the largest cursor_column (a pass's high mark)
	versionQuery        string        // Params.VersionQuery
	maxRecord           int64         // Params.MaxRecordBytes
	lookback            time.Duration // Params.Lookback
	lookbackValues      int64         // Params.LookbackValues

	mu         sync.Mutex
	cursorType string // the cursor column's type tag, as the last page read it
	conn       *pgx.Conn
	slices     map[source.Slice]sliceQuery // ReadSlice's statements, by slice
}

var _ source.Source = (*Source)(nil)

// New returns a Source for p after checking, on the server, that the query or
// table can be read and has the key columns. Errors wrap source.ErrInvalid
// (bad parameters, bad SQL, unknown columns), source.ErrAuth (credentials,
// permission) or
// source.ErrUnavailable (the server cannot be reached).
func New(ctx context.Context, p Params) (*Source, error) {
	invalid := func(format string, args ...any) (*Source, error) {
		return nil, fmt.Errorf("postgres source: "+format+": %w", append(args, source.ErrInvalid)...)
	}
	query, table := strings.TrimSpace(p.Query), strings.TrimSpace(p.Table)
	switch {
	case strings.TrimSpace(p.DSN) == "":
		return invalid("dsn is empty")
	case query != "" && table != "":
		return invalid("set query or table, not both")
	case query == "" && table == "":
		return invalid("set a query or a table")
	}
	cursorCol, identity := p.CursorColumn, p.Identity
	if cursorCol == "" {
		cursorCol = identity
	}
	if cursorCol == "" {
		return invalid("set cursor_column (or identity) for keyset pagination")
	}
	cfg, err := pgx.ParseConfig(p.DSN)
	if err != nil {
		// pgx masks passwords in parse errors only on a best-effort basis:
		// say nothing of the DSN's text.
		return invalid("dsn cannot be parsed (want postgres://user@host:5432/db?sslmode=... or key=value pairs)")
	}
	configure(cfg)

	s := &Source{cfg: cfg, password: cfg.Password, keys: []string{cursorCol}, identity: identity, versionQuery: p.VersionQuery, maxRecord: p.MaxRecordBytes, lookback: max(p.Lookback, 0),
		lookbackValues: max(p.LookbackValues, 0)}
	if s.maxRecord <= 0 {
		s.maxRecord = DefaultMaxRecordBytes
	}
	if identity != "" && identity != cursorCol {
		s.keys = append(s.keys, identity)
	}
	loc := fmt.Sprintf("postgres:%s:%d/%s/", cfg.Host, cfg.Port, cfg.Database)
	if table != "" {
		parts := strings.Split(table, ".")
		for _, part := range parts {
			if part == "" || len(parts) > 2 {
				return invalid("table %q: want name or schema.name", table)
			}
		}
		s.isTable = true
		s.from = pgx.Identifier(parts).Sanitize()
		s.id = loc + table
	} else {
		sum := sha256.Sum256([]byte(normalizeQuery(query)))
		// A trailing "-- comment" must not swallow the closing parenthesis.
		s.from = "(" + strings.TrimRight(query, "; \t\r\n") + "\n)"
		s.id = loc + "query:" + hex.EncodeToString(sum[:8])
	}
	s.buildSQL()
	if err := s.check(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	s.buildSQL() // with the operators check found
	return s, nil
}

// configure fixes the session settings that shape the values' text, so the
// same row prints (and keys) the same on every worker. Only the settings
// PgBouncer tracks (DateStyle, TimeZone, application_name) go in the startup
// packet: PgBouncer refuses a connection that names any other ("unsupported
// startup parameter"), in every pool mode. The others are set in each read's
// transaction (beginSnapshot), which holds in transaction pooling too.
func configure(cfg *pgx.ConnConfig) {
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec // text parameters and results, one round trip
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	set := func(name, value string, force bool) {
		for k := range cfg.RuntimeParams {
			if strings.EqualFold(k, name) {
				if !force {
					return
				}
				delete(cfg.RuntimeParams, k)
			}
		}
		cfg.RuntimeParams[name] = value
	}
	set("DateStyle", "ISO", true)
	for _, name := range perTransaction {
		for k := range cfg.RuntimeParams {
			if strings.EqualFold(k, name) {
				delete(cfg.RuntimeParams, k)
			}
		}
	}
	set("TimeZone", "UTC", false)
	set("application_name", "oncesync", false)
}

// perTransaction are the settings beginSnapshot sets in every read's
// transaction, not on connecting (see configure).
var perTransaction = []string{"IntervalStyle", "extra_float_digits", "bytea_output", "lc_monetary"}

// beginSnapshot starts a read: a REPEATABLE READ, READ ONLY transaction with
// the value-shaping settings PgBouncer does not carry, in the one round trip
// of BEGIN (a simple-protocol query of several statements).
const beginSnapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; " +
	"SET LOCAL IntervalStyle = postgres; SET LOCAL extra_float_digits = 3; SET LOCAL bytea_output = hex; " +
	"SET LOCAL lc_monetary = 'C'"

// col is the quoted reference to column name of the relation src.
func col(name string) string { return pgx.Identifier{"src", name}.Sanitize() }

func (s *Source) buildSQL() {
	refs := make([]string, len(s.keys))
	isNull := make([]string, len(s.keys))
	for i, k := range s.keys {
		refs[i] = col(k)
		isNull[i] = refs[i] + " IS NULL"
	}
	s.pages = s.pageSQL("", "")
	s.nullSQL = "SELECT EXISTS (SELECT 1 FROM " + s.from + " AS src WHERE " + strings.Join(isNull, " OR ") + ")"
	if !strings.HasPrefix(s.from, "(") {
		s.findNulls = "SELECT * FROM " + s.from + " AS src WHERE " + strings.Join(isNull, " OR ")
		s.findTies = "SELECT " + strings.Join(refs, ", ") + ", count(*) FROM " + s.from + " AS src GROUP BY " + strings.Join(refs, ", ") + " HAVING count(*) > 1"
	}
	// The largest cursor_column by its ORDER BY, not max(): uuid has no
	// max(), and the keyset already needs the order. Named max, so the
	// result hashes as max()'s did.
	s.highSQL = "SELECT " + refs[0] + " FROM " + s.from + " AS src WHERE " + refs[0] + " IS NOT NULL ORDER BY " + refs[0] + " DESC LIMIT 1"
	s.versionSQL = "SELECT count(*), (" + s.highSQL + ") AS max FROM " + s.from + " AS src"
}

// statements are the SQL of pages over the rows of one predicate.
type statements struct {
	// first reads the first page ($1 the LIMIT), next the page after the
	// key $2, ... .
	first, next string
	// tie counts (up to 2) the rows whose key equals $1, ... as the
	// pages' ">" compares it: in the columns' types and collations.
	tie string
	// atOrBefore reads the last row whose key is not after $1, ... .
	atOrBefore string
}

// pageSQL returns the statements of the rows that match pred (every row
// when "") joined to lateral (a LATERAL subquery pred reads).
func (s *Source) pageSQL(lateral, pred string) statements {
	refs := make([]string, len(s.keys))
	desc := make([]string, len(s.keys))
	conds := make([]string, len(s.keys), len(s.keys)+1)
	for i, k := range s.keys {
		refs[i] = col(k)
		desc[i] = refs[i] + " DESC"
		conds[i] = refs[i] + " IS NOT NULL"
	}
	if pred != "" {
		conds = append(conds, "("+pred+")")
	}
	base := "SELECT * FROM " + s.from + " AS src WHERE " + strings.Join(conds, " AND ")
	if lateral != "" {
		// Only src's columns: the subquery's are not the source's.
		base = "SELECT src.* FROM " + s.from + " AS src" + lateral + " WHERE " + strings.Join(conds, " AND ")
	}
	tail := " ORDER BY " + strings.Join(refs, ", ") + " LIMIT $1"
	after, _ := s.keyset(refs, 2)
	after1, equal := s.keyset(refs, 1)
	return statements{
		first: base + tail,
		next:  base + " AND " + after + tail,
		tie:   "SELECT count(*) FROM (" + base + " AND " + equal + " LIMIT 2) AS oncesync_tie",
		// The keys are NOT NULL here, so "not after" is "at or before".
		atOrBefore: base + " AND NOT " + after1 + " ORDER BY " + strings.Join(desc, ", ") + " LIMIT 1",
	}
}

// keyset returns the conditions "key after" and "key equal to" the
// parameters $from, $from+1, ... Row comparisons when every key's
// operators are found by their plain names (an index on the keys serves
// them); otherwise column by column, each with its type's own operators
// (see operatorSchemas), the first key bounded below for the index.
func (s *Source) keyset(refs []string, from int) (after, equal string) {
	params := make([]string, len(refs))
	for i := range refs {
		params[i] = "$" + strconv.Itoa(from+i)
	}
	if !slices.ContainsFunc(s.opSchemas, func(sch string) bool { return sch != "" }) {
		order, keys := strings.Join(refs, ", "), strings.Join(params, ", ")
		return "(" + order + ") > (" + keys + ")", "(" + order + ") = (" + keys + ")"
	}
	op := func(i int, name string) string {
		if i < len(s.opSchemas) && s.opSchemas[i] != "" {
			return " OPERATOR(" + s.opSchemas[i] + "." + name + ") "
		}
		return " " + name + " "
	}
	n := len(refs)
	after = refs[n-1] + op(n-1, ">") + params[n-1]
	eqs := []string{refs[n-1] + op(n-1, "=") + params[n-1]}
	for i := n - 2; i >= 0; i-- {
		after = "(" + refs[i] + op(i, ">") + params[i] + " OR (" + refs[i] + op(i, "=") + params[i] + " AND " + after + "))"
		eqs = append([]string{refs[i] + op(i, "=") + params[i]}, eqs...)
	}
	if n > 1 {
		after = refs[0] + op(0, ">=") + params[0] + " AND " + after
	}
	return "(" + after + ")", "(" + strings.Join(eqs, " AND ") + ")"
}

// ID returns "postgres:<host>:<port>/<database>/" followed by the table as
// given, or by "query:" and the first 16 hex digits of the SHA-256 of the
// normalized query (comments removed, whitespace collapsed). The user,
// password and connection options are not part of it.
func (s *Source) ID() string { return s.id }

// Close closes the connection. The Source may be used again after (it
// reconnects).
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeConn()
}

func (s *Source) closeConn() error {
	if s.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := s.conn.Close(ctx)
	s.conn = nil
	if err != nil {
		return fmt.Errorf("%s: close: %s", s.id, s.scrub(err.Error()))
	}
	return nil
}

// snapshot runs fn in a REPEATABLE READ, READ ONLY transaction on the
// Source's connection, connecting first if needed. s.mu must be held. Errors
// are classified (see classify).
func (s *Source) snapshot(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	if s.conn != nil && s.conn.IsClosed() {
		s.conn = nil
	}
	if s.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, s.cfg)
		if err != nil {
			return s.classify(ctx, "connect", err)
		}
		s.conn = conn
	}
	tx, err := s.conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginSnapshot})
	if err != nil {
		s.dropIfBroken()
		return s.classify(ctx, what, err)
	}
	err = fn(tx)
	// Read only: nothing to commit. A failed rollback leaves the connection
	// unusable, so it is dropped; what was read stays valid.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if rerr := tx.Rollback(rctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
		_ = s.closeConn()
	}
	s.dropIfBroken()
	if err != nil {
		return s.classify(ctx, what, err)
	}
	return nil
}

func (s *Source) dropIfBroken() {
	if s.conn != nil && s.conn.IsClosed() {
		s.conn = nil
	}
}

// check verifies that the relation can be read and has the key columns (a
// LIMIT 0 page) and, for a table, whether the catalog forbids NULL keys.
func (s *Source) check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot(ctx, "check", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.pages.first, "0")
		if err != nil {
			return err
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		fds := rows.FieldDescriptions()
		idx, _, err := s.columns(fds)
		if err != nil {
			return err
		}
		for _, fd := range fds {
			if fd.Name == s.identity {
				s.identOID = fd.DataTypeOID
			}
		}
		// fds are the connection's until its next query: keep the keys'
		// types first.
		keyOIDs := make([]uint32, len(idx))
		for k, i := range idx {
			keyOIDs[k] = fds[i].DataTypeOID
		}
		if s.textEqual, err = s.tieFree(ctx, tx, keyOIDs); err != nil {
			return err
		}
		if s.opSchemas, err = s.operatorSchemas(ctx, tx, keyOIDs); err != nil {
			return err
		}
		if !s.isTable {
			return replayPaused(ctx, tx)
		}
		names := make([]string, len(s.keys))
		copy(names, s.keys)
		if len(names) == 1 {
			names = append(names, names[0])
		}
		var n int64
		err = tx.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_attribute
			WHERE attrelid = to_regclass($1) AND attname IN ($2, $3) AND attnotnull AND NOT attisdropped`,
			s.from, names[0], names[1]).Scan(&n)
		if err != nil {
			return err
		}
		s.keysNotNull = n == int64(len(s.keys))
		return replayPaused(ctx, tx)
	})
}

// columns checks a result's columns: names must be unique (they key the
// record's Fields) and include the key columns. It returns the key columns'
// indexes and type tags.
func (s *Source) columns(fds []pgconn.FieldDescription) (idx []int, tags []string, err error) {
	seen, err := fieldIndex(fds)
	if err != nil {
		return nil, nil, err
	}
	idx = make([]int, len(s.keys))
	tags = make([]string, len(s.keys))
	for k, name := range s.keys {
		i, ok := seen[name]
		if !ok {
			return nil, nil, fmt.Errorf("the result has no column %q: %w", name, source.ErrInvalid)
		}
		idx[k] = i
		tags[k] = s.typeTag(fds[i].DataTypeOID)
	}
	return idx, tags, nil
}

// fieldIndex maps a result's column names to their positions. Names must be
// unique: they key a record's Fields.
func fieldIndex(fds []pgconn.FieldDescription) (map[string]int, error) {
	seen := make(map[string]int, len(fds))
	for i, fd := range fds {
		if _, dup := seen[fd.Name]; dup {
			return nil, fmt.Errorf("the result has two columns named %q; alias one of them in the query: %w", fd.Name, source.ErrInvalid)
		}
		seen[fd.Name] = i
	}
	return seen, nil
}

// checkSize refuses a row larger than the limit, naming it by its place
// (row n of what), never by its values.
func (s *Source) checkSize(raw [][]byte, n int, what string) error {
	if s.maxRecord <= 0 {
		return nil // a Source not made by New (tests)
	}
	var size int64
	for _, v := range raw {
		size += int64(len(v))
	}
	if size > s.maxRecord {
		return fmt.Errorf("row %d %s: %d bytes is larger than max_record_bytes (%d): %w", n, what, size, s.maxRecord, source.ErrInvalid)
	}
	return nil
}

// record converts a result row (see convert); it does not alias raw.
func record(fds []pgconn.FieldDescription, raw [][]byte) source.Record {
	fields := make(map[string]any, len(fds))
	for i, fd := range fds {
		fields[fd.Name] = convert(fd.DataTypeOID, raw[i])
	}
	return source.Record{Fields: fields}
}

// typeTag names a type for cursors: pgx's name for the built-in types, the
// OID in decimal for others.
func (s *Source) typeTag(oid uint32) string {
	if s.conn != nil {
		if t, ok := s.conn.TypeMap().TypeForOID(oid); ok {
			return t.Name
		}
	}
	return strconv.FormatUint(uint64(oid), 10)
}

// ReadPage reads up to size records after cursor ("" is the start), in
// (cursor_column, identity) order, in one REPEATABLE READ snapshot. See the
// package documentation for Next at the end of the source and for errors.
func (s *Source) ReadPage(ctx context.Context, cursor string, size int) (source.Page, error) {
	return s.read(ctx, cursor, size, func() (sliceQuery, bool) { return sliceQuery{}, false })
}

// read is ReadPage with the statements query returns (called with s.mu
// held); ok false means the whole table's.
func (s *Source) read(ctx context.Context, cursor string, size int, query func() (sliceQuery, bool)) (source.Page, error) {
	if size < 1 {
		return source.Page{}, fmt.Errorf("%s: page size %d: must be at least 1: %w", s.id, size, source.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return source.Page{}, err
	}
	pos, high, err := parsePass(cursor, len(s.keys))
	if err != nil {
		return source.Page{}, fmt.Errorf("%s: %w", s.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := query()
	if !ok {
		q = sliceQuery{statements: s.pages}
	}
	var page source.Page
	err = s.snapshot(ctx, "read page", func(tx pgx.Tx) error {
		if ok {
			// The predicate's long expression makes the planner expect a
			// costly scan and compile it with JIT, which takes seconds; a
			// page stops at its LIMIT long before that pays.
			if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
				return err
			}
		}
		var err error
		page, err = s.readPageSQL(ctx, tx, pageSQL{statements: q.statements, identOID: s.identOID, checkIdent: ok}, cursor, pos, high, size)
		return err
	})
	if err != nil {
		return source.Page{}, err
	}
	return page, nil
}

// pageSQL is the statements a page is read with.
type pageSQL struct {
	statements
	// checkIdent: the statements were built for an identity column of
	// type identOID (a slice's predicate), which the result must still have.
	checkIdent bool
	identOID   uint32
}

func (s *Source) readPageSQL(ctx context.Context, tx pgx.Tx, q pageSQL, cursor string, pos position, high keyValue, size int) (source.Page, error) {
	sql, args := q.first, []any{strconv.Itoa(size + 1)}
	if pos != nil {
		sql = q.next
		for _, kv := range pos {
			// Strings travel in text format, typed by PostgreSQL from the
			// column they are compared with: its input function reads
			// exactly what its output function printed.
			args = append(args, kv.Text)
		}
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return source.Page{}, err
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	var (
		keyIdx  []int
		keyTags []string
	)
	if fds != nil {
		if keyIdx, keyTags, err = s.columns(fds); err != nil {
			return source.Page{}, err
		}
		if q.checkIdent {
			for _, fd := range fds {
				if fd.Name == s.identity && fd.DataTypeOID != q.identOID {
					return source.Page{}, fmt.Errorf("column %q changed type since the source was opened: %w", s.identity, source.ErrChanged)
				}
			}
		}
		for k, kv := range pos {
			if kv.Type != keyTags[k] {
				return source.Page{}, fmt.Errorf("column %q is now of type %s; the cursor was saved with type %s: %w",
					s.keys[k], keyTags[k], kv.Type, source.ErrChanged)
			}
		}
		s.cursorType = keyTags[0]
	}
	page := source.Page{Cursor: cursor, Records: make([]source.Record, 0, min(size, 4096))}
	last := pos
	more := false
	maybeTie := false // the row after the page may equal the last in its columns' equality
	for rows.Next() {
		raw := rows.RawValues()
		if len(page.Records) == size {
			// The row after the page: if it has the page's last key, the
			// keys are not unique and the next page would skip it.
			if sameKey(last, keyIdx, raw) {
				return source.Page{}, s.tieError()
			}
			maybeTie = s.differOnlyInText(last, keyIdx, raw)
			more = true
			break
		}
		if err := s.checkSize(raw, len(page.Records)+1, "of the page"); err != nil {
			return source.Page{}, err
		}
		page.Records = append(page.Records, record(fds, raw))
		// Whether this row is the page's last is known only after the next
		// Next, when raw is gone: keep every row's key (a few small strings).
		last = make(position, len(keyIdx))
		for k, i := range keyIdx {
			last[k] = keyValue{Type: keyTags[k], Text: string(raw[i])}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return source.Page{}, err
	}
	if maybeTie {
		// 'bob' and 'BOB' print apart but are one value in a
		// nondeterministic collation or citext (1.0 and 1.00 in numeric),
		// and the next page's ">" compares values: ask the server, in this
		// snapshot, whether another row holds the last key.
		args := make([]any, len(last))
		for k, kv := range last {
			args[k] = kv.Text
		}
		var n int64
		if err := tx.QueryRow(ctx, q.tie, args...).Scan(&n); err != nil {
			return source.Page{}, err
		}
		if n > 1 {
			return source.Page{}, s.tieError()
		}
	}
	if high.Type != "" && high.Type != keyTags[0] {
		high = keyValue{} // the column changed type: this page begins the count
	}
	if more {
		if high.Type == "" && s.looksBack(keyTags[0]) && s.identity != "" {
			// The first page of a pass that goes on: the largest key now
			// bounds the rows this pass may miss (see "Rows committed late").
			// Only with an identity: without one, a row's delivery key
			// holds its page's cursor, which must be the same when a run
			// reads the page again after a kill, whatever was written
			// since (docs/guide.md#what-a-run-does).
			if high, err = s.highMark(ctx, tx, keyTags[0]); err != nil {
				return source.Page{}, err
			}
		}
		page.Next = last.withHigh(high)
		return page, nil
	}
	page.Next = last.String()
	page.End = true
	from := last
	if len(page.Records) == 0 && pos != nil && s.looksBack(pos[0].Type) {
		// The page began where an earlier one of the pass stopped, or
		// where the last pass ended, and the rows read there, or the row
		// ahead of them, are gone (deleted, or their key moved back).
		// Moving back from the cursor itself would move back again on
		// every pass without rows; not moving back would leave unread the
		// rows committed late behind the earlier page's last row. So the
		// pass ends moved back from the last row at or before the cursor,
		// which the next pass reads again, and ends at again.
		if from, err = s.lastAtOrBefore(ctx, tx, q.atOrBefore, pos); err != nil {
			return source.Page{}, err
		}
		page.Next = "" // without such a row: whatever comes, from the start
	}
	if len(from) > 0 {
		back, err := s.lookbackFrom(ctx, tx, from, high)
		if err != nil {
			return source.Page{}, err
		}
		page.Next = back.String()
	}
	if !s.keysNotNull {
		var nulls bool
		if err := tx.QueryRow(ctx, s.nullSQL).Scan(&nulls); err != nil {
			return source.Page{}, err
		}
		if nulls {
			return source.Page{}, fmt.Errorf("some rows have a NULL %s, which keyset pagination cannot read: make the column NOT NULL or COALESCE it in the query%s: %w",
				strings.Join(quoteAll(s.keys), " or "), source.FindWith(s.findNulls), source.ErrInvalid)
		}
	}
	// Last: it may abort tx on a server without the functions.
	if err := replayPaused(ctx, tx); err != nil {
		return source.Page{}, err
	}
	return page, nil
}

// replayPausedSQL asks whether the server is a hot standby whose WAL replay
// is paused (CASE: pg_is_wal_replay_paused fails outside recovery).
const replayPausedSQL = `SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_is_wal_replay_paused() ELSE false END`

// errReplayPaused is the refusal to end a pass on a paused standby.
var errReplayPaused = errors.New("the source is a hot standby whose WAL replay is paused (pg_wal_replay_pause()), " +
	"so its rows are as old as the pause and a run would report them as fresh: " +
	"resume it with SELECT pg_wal_replay_resume(), or point the dsn at the primary or another standby")

// replayPaused fails with source.ErrUnavailable when tx's server is a hot
// standby whose replay is paused: its snapshot stays at the pause however
// long the primary writes on, and a pass ending there would save a cursor
// and report success on stale data (docs/guide.md#reading-from-a-replica).
// A lagging standby is not refused: it is the primary's state some moments
// ago, which the lookback covers like a late commit. A server without
// the functions (a PostgreSQL-compatible one) is not a standby to ask.
// It runs last in tx: an error aborts the transaction.
func replayPaused(ctx context.Context, tx pgx.Tx) error {
	var paused bool
	err := tx.QueryRow(ctx, replayPausedSQL).Scan(&paused)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "42883": // undefined_function
		return nil
	case err != nil:
		return err
	case paused:
		return fmt.Errorf("%w: %w", source.ErrUnavailable, errReplayPaused)
	}
	return nil
}

var _ source.CursorKind = (*Source)(nil)

// CursorKind names the cursor column, its type as the last page read it
// ("" before any) and the lookback that applies to it.
func (s *Source) CursorKind() (column, typ, window string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, isTime := lookbackSQL[s.cursorType]
	_, isInt := intLeast[s.cursorType]
	switch {
	case isTime && s.lookback > 0:
		window = fmt.Sprintf("cursor_lookback (%s)", s.lookback)
	case isInt && s.lookbackValues > 0:
		window = fmt.Sprintf("cursor_lookback_values (%d)", s.lookbackValues)
	}
	return s.keys[0], s.cursorType, window
}

// lookbackSQL moves a time value back by an interval (the lookback and the
// type's smallest step), printing it as the column's own values print.
// The earlier of the value and the pass's high mark ($3, NULL for none),
// and, for an instant, the database's clock: a row stamped in the future
// would otherwise leave the rows changed before that time below the cursor
// (see "Rows stamped in the future"). A timestamp or date without a zone
// names no instant (its writers' zone is not known), so it is not clamped.
var lookbackSQL = map[string]string{
	"timestamptz": `SELECT (LEAST($1::timestamptz, $3::timestamptz, now()) - $2::interval - interval '1 microsecond')::text`,
	"timestamp":   `SELECT (LEAST($1::timestamp, $3::timestamp) - $2::interval - interval '1 microsecond')::text`,
	"date":        `SELECT (LEAST($1::date, $3::date) - $2::interval - interval '1 day')::date::text`,
}

// intLeast is the smallest value of each integer type a cursor can follow.
var intLeast = map[string]int64{"int2": math.MinInt16, "int4": math.MinInt32, "int8": math.MinInt64}

// lookbackFrom is p with its cursor_column value, or the pass's high mark
// when that is lower, moved back by the lookback when it is a time, or by
// the values' lookback when it is an integer (see "Rows committed late";
// the start of the source when that is below the type's smallest value); p
// itself otherwise.
func (s *Source) lookbackFrom(ctx context.Context, tx pgx.Tx, p position, high keyValue) (position, error) {
	var highText any // NULL: no mark
	if high.Type == p[0].Type {
		highText = high.Text
	}
	if least, isInt := intLeast[p[0].Type]; isInt {
		if s.lookbackValues == 0 {
			return p, nil
		}
		from := p[0].Text
		if h, err := strconv.ParseInt(high.Text, 10, 64); err == nil && highText != nil {
			if v, err := strconv.ParseInt(from, 10, 64); err == nil && h < v {
				from = high.Text
			}
		}
		back, start, ok := source.IntLookback(from, s.lookbackValues, least)
		switch {
		case !ok:
			return p, nil
		case start:
			return nil, nil
		}
		out := slices.Clone(p)
		out[0].Text = back
		return out, nil
	}
	q, ok := lookbackSQL[p[0].Type]
	if !ok || s.lookback == 0 {
		return p, nil
	}
	var text string
	if err := tx.QueryRow(ctx, q, p[0].Text, fmt.Sprintf("%d microseconds", s.lookback.Microseconds()), highText).Scan(&text); err != nil {
		return nil, err
	}
	out := slices.Clone(p)
	out[0].Text = text
	return out, nil
}

// highMark is the largest cursor_column value, of type tag typ, in tx's
// snapshot, as PostgreSQL prints it (Type "" when there are no rows).
func (s *Source) highMark(ctx context.Context, tx pgx.Tx, typ string) (keyValue, error) {
	rows, err := tx.Query(ctx, s.highSQL)
	if err != nil {
		return keyValue{}, err
	}
	defer rows.Close()
	var high keyValue
	if rows.Next() {
		if raw := rows.RawValues(); len(raw) == 1 && raw[0] != nil {
			high = keyValue{Type: typ, Text: string(raw[0])}
		}
	}
	rows.Close()
	return high, rows.Err()
}

// tieError is the failure of two rows sharing the key at a page boundary.
func (s *Source) tieError() error {
	return fmt.Errorf("two rows share the key (%s) at a page boundary, so a page would skip rows: %s%s: %w",
		strings.Join(s.keys, ", "), s.uniqueHint(), source.FindWith(s.findTies), source.ErrInvalid)
}

// differOnlyInText reports whether raw's key differs from p only in
// columns whose equal values may print apart (see tieFree), so that only
// the server can tell whether they are one key.
func (s *Source) differOnlyInText(p position, keyIdx []int, raw [][]byte) bool {
	if len(p) != len(keyIdx) || len(s.textEqual) != len(keyIdx) {
		return len(p) == len(keyIdx) // not known: ask
	}
	for k, i := range keyIdx {
		if string(raw[i]) != p[k].Text && s.textEqual[k] {
			return false
		}
	}
	return true
}

// printsOnce are the types whose equal values always print alike, so that
// keys that print apart are apart.
var printsOnce = map[uint32]bool{
	pgtype.BoolOID: true, pgtype.Int2OID: true, pgtype.Int4OID: true, pgtype.Int8OID: true, pgtype.OIDOID: true,
	pgtype.UUIDOID: true, pgtype.DateOID: true, pgtype.TimeOID: true, pgtype.TimestampOID: true,
	pgtype.TimestamptzOID: true, pgtype.ByteaOID: true, pgtype.NameOID: true, pgtype.QCharOID: true,
}

// tieFree reports, for each key column's type, whether its equal
// values always print alike: the types of printsOnce, and text and
// varchar in a deterministic collation (the database's default is one).
// Other types (numeric's scale, citext, char(n)'s blanks, a
// nondeterministic collation's case or accents) can hold values that
// print apart and compare equal.
func (s *Source) tieFree(ctx context.Context, tx pgx.Tx, keyOIDs []uint32) ([]bool, error) {
	out := make([]bool, len(keyOIDs))
	for k, oid := range keyOIDs {
		switch {
		case printsOnce[oid]:
			out[k] = true
		case oid == pgtype.TextOID || oid == pgtype.VarcharOID:
			// The column's collation, which the pages' ORDER BY and ">"
			// compare in, is the scalar subquery's.
			err := tx.QueryRow(ctx, `SELECT coalesce((SELECT c.collisdeterministic FROM pg_catalog.pg_collation c
				WHERE c.oid = pg_catalog.to_regcollation(pg_catalog.pg_collation_for((SELECT `+col(s.keys[k])+` FROM `+s.from+` AS src LIMIT 0)))), false)`).Scan(&out[k])
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// operatorSchemas returns, for each key column's type, the schema of
// its type's comparison operators (the default btree operator class's,
// which ORDER BY sorts by) when the session's search_path does not find
// them by name, else "". A type of an extension installed off the
// search_path (citext in a schema "extensions") sorts by its own order,
// while a plain ">" finds the one of a type it casts to (text's), and the
// next page would skip rows that sort after the last and compare below it.
func (s *Source) operatorSchemas(ctx context.Context, tx pgx.Tx, keyOIDs []uint32) ([]string, error) {
	out := make([]string, len(keyOIDs))
	for k, oid := range keyOIDs {
		var (
			schema  string
			visible bool
		)
		err := tx.QueryRow(ctx, `SELECT n.nspname, pg_catalog.pg_operator_is_visible(o.oid)
			FROM pg_catalog.pg_opclass c
			JOIN pg_catalog.pg_am m ON m.oid = c.opcmethod AND m.amname = 'btree'
			JOIN pg_catalog.pg_amop a ON a.amopfamily = c.opcfamily AND a.amopstrategy = 5
				AND a.amoplefttype = c.opcintype AND a.amoprighttype = c.opcintype
			JOIN pg_catalog.pg_operator o ON o.oid = a.amopopr
			JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace
			WHERE c.opcdefault AND c.opcintype = $1::oid`, strconv.FormatUint(uint64(oid), 10)).Scan(&schema, &visible)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Text's class serves varchar, anyenum's every enum: built in.
		case err != nil:
			return nil, err
		case !visible:
			out[k] = pgx.Identifier{schema}.Sanitize()
		}
	}
	return out, nil
}

// looksBack reports whether a lookback applies to a cursor_column of type
// typ (see "Rows committed late").
func (s *Source) looksBack(typ string) bool {
	if _, isInt := intLeast[typ]; isInt {
		return s.lookbackValues > 0
	}
	_, isTime := lookbackSQL[typ]
	return isTime && s.lookback > 0
}

// lastAtOrBefore returns the key of the last row, in page order, whose key
// is not after p (sql is statements.atOrBefore), or nil when there is none.
func (s *Source) lastAtOrBefore(ctx context.Context, tx pgx.Tx, sql string, p position) (position, error) {
	args := make([]any, len(p))
	for k, kv := range p {
		args[k] = kv.Text
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keyIdx, keyTags, err := s.columns(rows.FieldDescriptions())
	if err != nil {
		return nil, err
	}
	var out position
	for rows.Next() {
		raw := rows.RawValues()
		out = make(position, len(keyIdx))
		for k, i := range keyIdx {
			out[k] = keyValue{Type: keyTags[k], Text: string(raw[i])}
		}
	}
	rows.Close()
	return out, rows.Err()
}

// sameKey reports whether raw's key columns print as p.
func sameKey(p position, keyIdx []int, raw [][]byte) bool {
	if len(p) != len(keyIdx) {
		return false
	}
	for k, i := range keyIdx {
		if raw[i] == nil || string(raw[i]) != p[k].Text {
			return false
		}
	}
	return true
}

func (s *Source) uniqueHint() string {
	if len(s.keys) == 1 {
		return "set identity to a unique column (the primary key) to break ties on cursor_column"
	}
	return "identity must be unique"
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

var _ source.Snapshotter = (*Source)(nil)

// NullKeys implements source.NullKeyer: a table whose catalog forbids
// NULL keys needs no query.
func (s *Source) NullKeys(ctx context.Context) (columns string, found bool, err error) {
	columns = strings.Join(quoteAll(s.keys), " or ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keysNotNull {
		return columns, false, nil
	}
	err = s.snapshot(ctx, "null keys", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, s.nullSQL).Scan(&found)
	})
	return columns, found, err
}

// Snapshot is Version of Params.VersionQuery: {"version": hex}.
func (s *Source) Snapshot(ctx context.Context) (map[string]any, error) {
	v, err := s.Version(ctx, s.versionQuery)
	if err != nil {
		return nil, err
	}
	return map[string]any{"version": v}, nil
}

// Version returns a canonical SHA-256 (64 hex digits) of the result of
// versionQuery, read in one REPEATABLE READ snapshot: the snapshot a
// partitioned run pins (docs/guide.md#the-checkpoint-barrier). An empty versionQuery means
//
//	SELECT count(*), (SELECT cursor_column ... ORDER BY cursor_column DESC LIMIT 1) AS max FROM <source>
//
// (the largest cursor_column taken by ORDER BY ... DESC LIMIT 1, so that
// a type without max(), such as uuid, has one) which changes when rows are
// added or removed or the cursor column grows (with cursor_column
// updated_at: on every update). The hash covers the
// result's column names and types and every value's text (NULL distinct from
// any text), length-prefixed, so two different results never hash alike.
func (s *Source) Version(ctx context.Context, versionQuery string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	sql := s.versionSQL
	if q := strings.TrimRight(strings.TrimSpace(versionQuery), "; \t\r\n"); q != "" {
		sql = q
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum string
	err := s.snapshot(ctx, "version query", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sql)
		if err != nil {
			return err
		}
		defer rows.Close()
		h := sha256.New()
		field := func(b []byte) {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
		field([]byte("oncesync-postgres-version-1"))
		fds := rows.FieldDescriptions()
		for _, fd := range fds {
			field([]byte(fd.Name))
			field([]byte(s.typeTag(fd.DataTypeOID)))
		}
		for rows.Next() {
			field([]byte("row"))
			for _, v := range rows.RawValues() {
				if v == nil {
					h.Write([]byte{0})
					continue
				}
				h.Write([]byte{1})
				field(v)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		sum = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		return "", err
	}
	return sum, nil
}
