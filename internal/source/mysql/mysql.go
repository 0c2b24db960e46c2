// Package mysql reads a MySQL 8 or MariaDB 10.11 table or query as an
// oncesync source, with keyset pagination, as source/postgres reads
// PostgreSQL (docs/config.md#mysql-source).
//
// # Paging
//
// A source is a table (Params.Table, e.g. "crm.contacts") or a query
// (Params.Query). Pages are read in the order of (cursor_column, identity):
//
//	SELECT * FROM (<query>) AS `src`
//	WHERE `src`.`k` IS NOT NULL AND `src`.`id` IS NOT NULL
//	  AND `src`.`k` >= K AND (`src`.`k` > K OR (`src`.`k` = K AND `src`.`id` > ID))
//	ORDER BY `src`.`k`, `src`.`id` LIMIT n
//
// (the row comparison spelt out, so MySQL reads an index (k, id) as one
// range), so a page costs one index range scan however deep into the source
// it is. The ties, NULL and uniqueness rules are the PostgreSQL source's: an
// empty cursor_column defaults to the identity; without an identity the
// cursor_column must be unique (a tie at a page boundary fails with
// source.ErrInvalid, never skips); rows with a NULL key fail the pass at its
// end. Strings compare in the column's collation, as ORDER BY sorts them:
// with a case- or accent-insensitive collation, the (cursor_column,
// identity) pair must be unique in that collation. A FLOAT key is refused
// (MySQL prints FLOAT values rounded, so a cursor would not read them back);
// use DOUBLE or DECIMAL. An ENUM or SET key is refused too: ORDER BY sorts
// it by the position of its values in the definition, while a comparison
// with the cursor's value compares text.
//
// Each page is read in its own transaction, START TRANSACTION WITH
// CONSISTENT SNAPSHOT, READ ONLY at REPEATABLE READ, in a session that is
// READ ONLY too: a page is one consistent snapshot (InnoDB), and the source
// can never write, not even DDL (which MySQL would otherwise run after an
// implicit commit). Rows are
// streamed from the server, so memory is bounded by the page size.
//
// Every statement goes over the text protocol without placeholders: key
// values and ids are written into it as literals built only from validated
// text (integers, decimals, doubles as digits; strings as _utf8mb4 X'hex';
// binary strings as X'hex'), so a "?" in a query is never mistaken for a
// parameter and no value is ever interpolated raw. Identifiers are quoted
// with backticks.
//
// # Cursors and incremental runs
//
// A cursor is the (cursor_column, identity) of the last row read, as MySQL
// prints them, with their types (see position); "" is the start. With
// cursor_column updated_at (ON UPDATE CURRENT_TIMESTAMP(6)) and identity the
// primary key, changed rows are re-sent once and unchanged rows never twice.
// As with the PostgreSQL source, a row committed after a pass read past its
// cursor value (updated_at is stamped when the row is written, not when the
// transaction commits) is read again only thanks to Params.Lookback: with
// a DATETIME, TIMESTAMP or DATE cursor_column, the cursor a pass ends at is
// the last row's value less the lookback (and one microsecond, or one day
// for a DATE), and the next run reads that window again; the ledger skips
// the rows unchanged since their delivery. With an identity, a pass of
// several pages moves back from the largest cursor_column value when it began instead, if that
// is lower (its first page reads it; later pages' cursors carry it as the
// high mark), so a long or resumed pass does not end past a row hidden from
// it. Other cursor types, and rows
// committed more than the lookback after they were stamped, are not
// covered: they wait until the cursor is reset.
//
// A TIMESTAMP value ahead of the server's clock (a writer whose clock runs
// ahead) would move the cursor a pass ends at past the rows changed before
// that time. With a lookback, a TIMESTAMP cursor a pass ends at is the
// server's clock (UTC_TIMESTAMP(6), read at the end of the pass) at most,
// less the lookback, as on PostgreSQL. A DATETIME or DATE names no instant
// (its writers' zone is not known) and is not clamped.
//
// # Re-reading rows by identity
//
// ReadIdentities (source.Refetcher) reads
//
//	SELECT * FROM (<query>) AS `src` WHERE `src`.`id` IN (...)
//
// with the ids as literals of the column's type, 1,000 per statement, in
// one snapshot.
//
// # Values
//
// A record's Fields hold what the PostgreSQL source gives for the same
// logical value:
//
//	NULL                               nil
//	TINYINT ... BIGINT, YEAR, BIT      int64 (an UNSIGNED BIGINT past int64: json.Number)
//	FLOAT, DOUBLE, DECIMAL             json.Number (DECIMAL keeps its scale: "12.50")
//	TIMESTAMP                          RFC 3339 in UTC ("2024-05-01T10:00:00.123456Z")
//	DATETIME                           RFC 3339 without zone ("2024-05-01T10:00:00.5")
//	JSON (MySQL)                       decoded (map[string]any, []any, json.Number...)
//	BINARY, VARBINARY, BLOB, GEOMETRY  standard base64
//	everything else                    MySQL's text: CHAR, VARCHAR, TEXT, ENUM, SET,
//	                                   DATE ("2024-05-01"), TIME, MariaDB's JSON
//
// MySQL has no boolean type: a BOOLEAN column is TINYINT(1) and reads as
// int64 0 or 1. CHAR values lose their trailing spaces (MySQL strips them).
// Zero dates ("0000-00-00") keep MySQL's text. A DECIMAL ZEROFILL loses
// the zeros MySQL pads it with ("000012.50" reads 12.50, its scale kept).
// Every session runs with time_zone '+00:00', so TIMESTAMP values read the
// same on every worker, with SET NAMES utf8mb4 (utf8mb4's default
// collation, the one of the _utf8mb4 literals cursors are written in, see
// configure), and without PAD_CHAR_TO_FULL_LENGTH in its sql_mode, so CHAR
// values lose their trailing spaces whatever the server's or the DSN's
// sql_mode (its other modes are kept, see sessionSQL).
//
// # Errors
//
// An unreachable server, a dropped connection, a timeout, a deadlock or a
// server shutting down wrap source.ErrUnavailable (retryable). Refused
// credentials and missing grants wrap source.ErrAuth; the server's other
// refusals (syntax, unknown table or column) wrap source.ErrInvalid; both
// with its message, error number and SQLSTATE; data errors
// keep only the number, as their messages can quote row values. A record
// larger than Params.MaxRecordBytes wraps source.ErrInvalid. A cursor that
// cannot be decoded wraps source.ErrBadCursor; a cursor whose key types no
// longer match the columns wraps source.ErrChanged. The DSN's password
// appears in no error and not in the ID.
package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/oncesync/oncesync/internal/source"
)

// Params configures a Source.
type Params struct {
	// DSN is a mysql:// (or mariadb://) URL, or the driver's own DSN
	// (user:pass@tcp(host:3306)/db?params). Its password is kept out of the
	// ID and every error.
	DSN string
	// Query or Table is what is read (exactly one is set). Table is "name"
	// or "database.name".
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
	// MaxRecordBytes bounds a record's size (its column names and values as
	// read); a larger record fails the page with source.ErrInvalid. 0 means
	// DefaultMaxRecordBytes.
	MaxRecordBytes int
	// Lookback moves the cursor a pass ends at back by this much of a time
	// cursor_column (see "Cursors and incremental runs"); 0 reads only rows
	// past the last one read.
	Lookback time.Duration
	// LookbackValues moves it back by this many values of an integer
	// cursor_column (TINYINT to BIGINT, signed or not); 0 is off.
	LookbackValues int64
}

// DefaultMaxRecordBytes is the record size limit when Params sets none.
const DefaultMaxRecordBytes = 1 << 20

// defaultConnectTimeout bounds a connection attempt when the DSN sets no
// timeout.
const defaultConnectTimeout = 10 * time.Second

// closeTimeout bounds the ROLLBACK that ends a snapshot.
const closeTimeout = 5 * time.Second

// Source reads a MySQL or MariaDB table or query. It holds a pool of at most
// one connection, opened on demand and reopened after it is lost; it is safe
// for concurrent use (calls are serialised), though a run uses it from one
// goroutine.
type Source struct {
	connector driver.Connector
	id        string
	password  string
	// from is the relation read: a quoted table name or "(query\n)".
	from string
	// keys are the key column names: cursor_column[, identity].
	keys []string
	// schema and table name a table source ("" schema: the DSN's database).
	isTable       bool
	schema, table string
	// keysNotNull reports that the catalog forbids NULL in every key column.
	keysNotNull bool
	maxRecord   int
	lookback    time.Duration // Params.Lookback
	lookbackN   int64         // Params.LookbackValues
	// cursorType is the cursor column's type as the last page read it
	// (guarded by mu).
	cursorType string

	base, order, nullSQL, versionSQL string
	// findNulls and findTies are the queries a person runs to find the rows
	// that stop keyset pagination ("": a query source, whose text may be long).
	findNulls, findTies string
	versionQuery        string
	// columns is the select list of the reads: "*", or every column by
	// name with each FLOAT one read as a DOUBLE (floats): the text
	// protocol prints a FLOAT with 6 significant digits (1234567 came as
	// 1.23457e+06, and a change past the sixth digit was never seen).
	columns string
	floats  map[string]bool

	// identity is Params.Identity; identType its column's type name, as
	// check found it (slice.go's conditions depend on it).
	identity, identType string

	mu     sync.Mutex
	db     *sql.DB
	slices map[source.Slice]string // ReadSlice's conditions, by slice ("": none)
}

var _ source.Source = (*Source)(nil)

// errBadDSN says nothing of the DSN's text, which holds the password.
var errBadDSN = errors.New("dsn cannot be parsed (want mysql://user:pass@host:3306/db?params or user:pass@tcp(host:3306)/db)")

// errCharset: results must come as UTF-8, as records are.
var errCharset = errors.New("dsn: charset and collation must be utf8mb4 ones (records are UTF-8); leave them out")

// ParseDSN reads a mysql:// or mariadb:// URL or the driver's DSN. Its
// errors never quote the DSN.
func ParseDSN(dsn string) (*mysqldrv.Config, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	// The connection's character set is what results arrive in.
	if cfg.Collation != "" && !strings.HasPrefix(strings.ToLower(cfg.Collation), "utf8mb4_") {
		return nil, errCharset
	}
	if _, q, ok := strings.Cut(cfg.FormatDSN(), "?"); ok {
		vals, _ := url.ParseQuery(q)
		for _, cs := range vals["charset"] {
			if !strings.EqualFold(cs, "utf8mb4") {
				return nil, errCharset
			}
		}
	}
	return cfg, nil
}

func parseDSN(dsn string) (*mysqldrv.Config, error) {
	dsn = strings.TrimSpace(dsn)
	scheme, _, isURL := strings.Cut(dsn, "://")
	if !isURL {
		cfg, err := mysqldrv.ParseDSN(dsn)
		if err != nil {
			return nil, errBadDSN
		}
		return cfg, nil
	}
	if !strings.EqualFold(scheme, "mysql") && !strings.EqualFold(scheme, "mariadb") {
		return nil, errBadDSN
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Hostname() == "" || strings.Contains(strings.Trim(u.Path, "/"), "/") {
		return nil, errBadDSN
	}
	cfg, err := mysqldrv.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, errBadDSN
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(u.Hostname(), port)
	cfg.DBName = strings.Trim(u.Path, "/")
	return cfg, nil
}

// configure fixes what shapes the values' text and the protocol, so the
// same row reads (and keys) the same on every worker.
func configure(cfg *mysqldrv.Config) {
	cfg.ParseTime = false         // temporal values as MySQL's text, converted by convert
	cfg.InterpolateParams = false // no placeholders are ever used (see the package documentation)
	cfg.MultiStatements = false
	cfg.AllowAllFiles = false
	cfg.Logger = &mysqldrv.NopLogger{} // errors are returned, never logged
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultConnectTimeout
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k := range cfg.Params {
		if strings.EqualFold(k, "time_zone") {
			delete(cfg.Params, k)
		}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	// SET NAMES utf8mb4, without COLLATE: the connection's collation is
	// then utf8mb4's default, the one of the _utf8mb4 literals a cursor is
	// written in. Text a query computes from numbers and literals
	// (CONCAT(a, '-', b)) takes the connection's collation, and compared
	// with a literal of another one it fails with "Illegal mix of
	// collations" (error 1267): the driver's utf8mb4_general_ci against
	// MySQL 8's utf8mb4_0900_ai_ci, or a DSN's collation=. Results are
	// utf8mb4 either way.
	_ = cfg.Apply(mysqldrv.Charset("utf8mb4", ""))
}

// sessionSQL fixes, on every new connection, what shapes the values' text
// and that configure cannot set outright: the session's sql_mode, which
// the server's configuration (sql_mode in my.cnf) or the DSN chooses, and
// the query may depend on, loses PAD_CHAR_TO_FULL_LENGTH only. With it,
// MySQL and MariaDB pad CHAR values to the column's length ("ab   "), so
// the same row would read otherwise on a server configured otherwise and
// be sent again. @@SESSION.sql_mode is the canonical list (upper case,
// comma-separated, combination modes expanded).
const sessionSQL = "SET SESSION sql_mode = TRIM(BOTH ',' FROM " +
	"REPLACE(CONCAT(',', @@SESSION.sql_mode, ','), ',PAD_CHAR_TO_FULL_LENGTH,', ','))"

// sessionConnector runs sessionSQL on each connection it opens, after the
// driver has set the DSN's parameters.
type sessionConnector struct{ driver.Connector }

func (c sessionConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("the driver's connection cannot run statements")
	}
	if _, err := ex.ExecContext(ctx, sessionSQL, nil); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// New returns a Source for p after checking, on the server, that the query or
// table can be read and has the key columns. Errors wrap source.ErrInvalid
// (bad parameters, bad SQL, unknown columns), source.ErrAuth (access
// denied) or
// source.ErrUnavailable (the server cannot be reached).
func New(ctx context.Context, p Params) (*Source, error) {
	invalid := func(format string, args ...any) (*Source, error) {
		return nil, fmt.Errorf("mysql source: "+format+": %w", append(args, source.ErrInvalid)...)
	}
	query, table := strings.TrimSpace(p.Query), strings.TrimSpace(p.Table)
	switch {
	case strings.TrimSpace(p.DSN) == "":
		return invalid("dsn is empty")
	case query != "" && table != "":
		return invalid("set query or table, not both")
	case query == "" && table == "":
		return invalid("set a query or a table")
	case p.MaxRecordBytes < 0:
		return invalid("max_record_bytes must not be negative")
	}
	cursorCol, identity := p.CursorColumn, p.Identity
	if cursorCol == "" {
		cursorCol = identity
	}
	if cursorCol == "" {
		return invalid("set cursor_column (or identity) for keyset pagination")
	}
	cfg, err := ParseDSN(p.DSN)
	if err != nil {
		return invalid("%v", err)
	}
	configure(cfg)
	connector, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return invalid("dsn: %s", strings.ReplaceAll(err.Error(), cfg.Passwd, "xxxxx"))
	}
	s := &Source{connector: sessionConnector{connector}, password: cfg.Passwd, keys: []string{cursorCol}, identity: identity,
		versionQuery: p.VersionQuery, maxRecord: p.MaxRecordBytes, lookback: max(p.Lookback, 0),
		lookbackN: max(p.LookbackValues, 0)}
	if s.maxRecord == 0 {
		s.maxRecord = DefaultMaxRecordBytes
	}
	if identity != "" && identity != cursorCol {
		s.keys = append(s.keys, identity)
	}
	loc := fmt.Sprintf("mysql:%s/%s/", cfg.Addr, cfg.DBName)
	if table != "" {
		parts := strings.Split(table, ".")
		for _, part := range parts {
			if part == "" || len(parts) > 2 {
				return invalid("table %q: want name or database.name", table)
			}
		}
		quoted := make([]string, len(parts))
		for i, part := range parts {
			quoted[i] = quoteIdent(part)
		}
		s.isTable = true
		s.table = parts[len(parts)-1]
		if len(parts) == 2 {
			s.schema = parts[0]
		}
		s.from = strings.Join(quoted, ".")
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
	return s, nil
}

// col is the quoted reference to column name of the relation src.
func col(name string) string { return "`src`." + quoteIdent(name) }

func (s *Source) buildSQL() {
	refs := make([]string, len(s.keys))
	notNull := make([]string, len(s.keys))
	isNull := make([]string, len(s.keys))
	for i, k := range s.keys {
		refs[i] = col(k)
		notNull[i] = refs[i] + " IS NOT NULL"
		isNull[i] = refs[i] + " IS NULL"
	}
	s.order = strings.Join(refs, ", ")
	if s.columns == "" {
		s.columns = "*"
	}
	s.base = "SELECT " + s.columns + " FROM " + s.from + " AS `src` WHERE " + strings.Join(notNull, " AND ")
	s.nullSQL = "SELECT EXISTS (SELECT 1 FROM " + s.from + " AS `src` WHERE " + strings.Join(isNull, " OR ") + ")"
	if !strings.HasPrefix(s.from, "(") {
		s.findNulls = "SELECT * FROM " + s.from + " AS `src` WHERE " + strings.Join(isNull, " OR ")
		s.findTies = "SELECT " + strings.Join(refs, ", ") + ", count(*) FROM " + s.from + " AS `src` GROUP BY " + strings.Join(refs, ", ") + " HAVING count(*) > 1"
	}
	s.versionSQL = "SELECT COUNT(*), MAX(" + refs[0] + ") FROM " + s.from + " AS `src`"
}

// pageSQL is the statement reading size rows after the key literals lits
// (nil: from the start).
func (s *Source) pageSQL(lits []string, size int) string {
	return s.pageSQLWhere("", lits, size)
}

// pageSQLWhere is pageSQL keeping only the rows that match cond ("": all).
func (s *Source) pageSQLWhere(cond string, lits []string, size int) string {
	var b strings.Builder
	b.WriteString(s.base)
	if cond != "" {
		b.WriteString(" AND (" + cond + ")")
	}
	if lits != nil {
		b.WriteString(" AND " + s.after(lits))
	}
	b.WriteString(" ORDER BY " + s.order + " LIMIT " + strconv.Itoa(size))
	return b.String()
}

// after is the condition "the key is after the literals lits".
func (s *Source) after(lits []string) string {
	k0, v0 := col(s.keys[0]), lits[0]
	if len(lits) == 1 {
		return k0 + " > " + v0
	}
	k1, v1 := col(s.keys[1]), lits[1]
	return k0 + " >= " + v0 + " AND (" + k0 + " > " + v0 + " OR (" + k0 + " = " + v0 + " AND " + k1 + " > " + v1 + "))"
}

// atOrBeforeSQL reads the last row that matches cond whose key is not after
// the literals lits (nil: the last row).
func (s *Source) atOrBeforeSQL(cond string, lits []string) string {
	var b strings.Builder
	b.WriteString(s.base)
	if cond != "" {
		b.WriteString(" AND (" + cond + ")")
	}
	desc := make([]string, len(s.keys))
	for k, key := range s.keys {
		desc[k] = col(key) + " DESC"
	}
	if lits != nil {
		b.WriteString(" AND NOT (" + s.after(lits) + ")")
	}
	b.WriteString(" ORDER BY " + strings.Join(desc, ", ") + " LIMIT 1")
	return b.String()
}

// ID returns "mysql:<host>:<port>/<database>/" followed by the table as
// given, or by "query:" and the first 16 hex digits of the SHA-256 of the
// normalized query (comments removed, whitespace collapsed). The user,
// password and connection options are not part of it.
func (s *Source) ID() string { return s.id }

// Close closes the connection. The Source may be used again after (it
// reconnects).
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("%s: close: %s", s.id, s.scrub(err.Error()))
	}
	return nil
}

// snapshot runs fn in a REPEATABLE READ, READ ONLY transaction with a
// consistent snapshot, on the Source's connection, connecting first if
// needed. s.mu must be held. Errors are classified (see classify).
func (s *Source) snapshot(ctx context.Context, what string, fn func(conn *sql.Conn) error) error {
	if s.db == nil {
		s.db = sql.OpenDB(s.connector)
		s.db.SetMaxOpenConns(1)
		s.db.SetMaxIdleConns(1)
		s.db.SetConnMaxIdleTime(5 * time.Minute)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.classify(ctx, "connect", err)
	}
	defer conn.Close()
	err = func() error {
		// READ ONLY for the session, not only the transaction: DDL commits
		// a transaction implicitly and would then run, but a read-only
		// session refuses it (error 1792).
		if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
			return err
		}
		return fn(conn)
	}()
	// Read only: nothing to commit. A failed rollback leaves the connection
	// in doubt, so it is discarded; what was read stays valid.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if _, rerr := conn.ExecContext(rctx, "ROLLBACK"); rerr != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	if err != nil {
		return s.classify(ctx, what, err)
	}
	return nil
}

// result is a query's columns: names, kinds and driver type names.
type result struct {
	names []string
	kinds []kind
	types []string
}

// readFloatsExactly makes the reads name every column of r, each FLOAT one
// as a DOUBLE (exact: a float widens to a double without loss), which
// columnsOf then reads back as a FLOAT. Nothing changes without one.
func (s *Source) readFloatsExactly(r result) {
	list := make([]string, len(r.names))
	floats := map[string]bool{}
	for i, name := range r.names {
		list[i] = col(name)
		if r.kinds[i] == kindFloat {
			floats[name] = true
			list[i] = "(" + col(name) + " + 0e0) AS " + quoteIdent(name)
		}
	}
	if len(floats) == 0 {
		return
	}
	s.columns, s.floats = strings.Join(list, ", "), floats
	s.buildSQL()
}

// columnsOf is the package's columnsOf, with the FLOAT columns read as
// DOUBLEs (readFloatsExactly) known as FLOATs again.
func (s *Source) columnsOf(rows *sql.Rows) (result, error) {
	r, err := columnsOf(rows)
	for i, name := range r.names {
		if s.floats[name] {
			r.kinds[i] = kindFloat
		}
	}
	return r, err
}

func columnsOf(rows *sql.Rows) (result, error) {
	cts, err := rows.ColumnTypes()
	if err != nil {
		return result{}, err
	}
	r := result{names: make([]string, len(cts)), kinds: make([]kind, len(cts)), types: make([]string, len(cts))}
	for i, ct := range cts {
		r.names[i] = ct.Name()
		r.types[i] = ct.DatabaseTypeName()
		r.kinds[i] = kindOf(r.types[i])
	}
	return r, nil
}

// fieldIndex maps a result's column names to their positions. Names must be
// unique: they key a record's Fields.
func (r result) fieldIndex() (map[string]int, error) {
	seen := make(map[string]int, len(r.names))
	for i, name := range r.names {
		if _, dup := seen[name]; dup {
			return nil, fmt.Errorf("the result has two columns named %q; alias one of them in the query: %w", name, source.ErrInvalid)
		}
		seen[name] = i
	}
	return seen, nil
}

// keyColumns checks a result's columns: names must be unique and include
// the key columns, of types a cursor can hold. It returns the key columns'
// indexes.
func (s *Source) keyColumns(r result) ([]int, error) {
	seen, err := r.fieldIndex()
	if err != nil {
		return nil, err
	}
	idx := make([]int, len(s.keys))
	for k, name := range s.keys {
		i, ok := seen[name]
		if !ok {
			return nil, fmt.Errorf("the result has no column %q: %w", name, source.ErrInvalid)
		}
		switch {
		case r.kinds[i] == kindFloat, r.kinds[i] == kindJSON:
			return nil, fmt.Errorf("column %q is of type %s, which cannot order a keyset (use DOUBLE, DECIMAL, an integer, a string or a date): %w",
				name, r.types[i], source.ErrInvalid)
		case r.types[i] == "ENUM", r.types[i] == "SET":
			// ORDER BY sorts an ENUM or SET by the position of its values
			// in the column's definition, but "> 'new'" compares their
			// text: a page would skip the rows whose value sorts after the
			// cursor's yet compares below it (an independent check,
			// 2026-12-04, read 2 rows of 4).
			return nil, fmt.Errorf("column %q is an %s, which MySQL sorts by the position of its values in the definition but compares as text, so pages would skip rows: "+
				"read it as text in a query (CAST(%s AS CHAR) AS %s): %w", name, r.types[i], quoteIdent(name), quoteIdent(name), source.ErrInvalid)
		}
		idx[k] = i
	}
	return idx, nil
}

// scanner scans rows into reused destinations.
type scanner struct {
	vals []any
	ptrs []any
}

func newScanner(n int) *scanner {
	sc := &scanner{vals: make([]any, n), ptrs: make([]any, n)}
	for i := range sc.vals {
		sc.ptrs[i] = &sc.vals[i]
	}
	return sc
}

func (sc *scanner) scan(rows *sql.Rows) error {
	clear(sc.vals)
	return rows.Scan(sc.ptrs...)
}

// record converts a scanned row (see convert), checking its size.
func (s *Source) record(r result, vals []any) (source.Record, error) {
	fields := make(map[string]any, len(r.names))
	n := 0
	for i, name := range r.names {
		n += len(name) + size(vals[i])
		fields[name] = convert(r.kinds[i], vals[i])
	}
	if n > s.maxRecord {
		return source.Record{}, fmt.Errorf("a row of about %d bytes is larger than max_record_bytes (%d): %w", n, s.maxRecord, source.ErrInvalid)
	}
	return source.Record{Fields: fields}, nil
}

// check verifies that the relation can be read and has the key columns (a
// LIMIT 0 page) and, for a table, whether the catalog forbids NULL keys.
func (s *Source) check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot(ctx, "check", func(conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, s.pageSQL(nil, 0))
		if err != nil {
			return err
		}
		r, err := columnsOf(rows)
		rows.Close()
		if err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if _, err := s.keyColumns(r); err != nil {
			return err
		}
		for i, name := range r.names {
			if name == s.identity {
				s.identType = r.types[i]
			}
		}
		s.readFloatsExactly(r)
		if !s.isTable {
			return nil
		}
		schema := "DATABASE()"
		if s.schema != "" {
			schema = strLiteral(s.schema)
		}
		names := make([]string, len(s.keys))
		for i, k := range s.keys {
			names[i] = strLiteral(k)
		}
		var n int64
		err = conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "+schema+
			" AND TABLE_NAME = "+strLiteral(s.table)+" AND COLUMN_NAME IN ("+strings.Join(names, ", ")+") AND IS_NULLABLE = 'NO'").Scan(&n)
		if err != nil {
			return err
		}
		s.keysNotNull = n == int64(len(s.keys))
		return nil
	})
}

// ReadPage reads up to size records after cursor ("" is the start), in
// (cursor_column, identity) order, in one consistent snapshot. See the
// package documentation for Next at the end of the source and for errors.
func (s *Source) ReadPage(ctx context.Context, cursor string, size int) (source.Page, error) {
	return s.read(ctx, cursor, size, func() string { return "" })
}

// read is ReadPage over the rows that the condition cond returns keeps
// ("": every row); cond is called with s.mu held.
func (s *Source) read(ctx context.Context, cursor string, size int, cond func() string) (source.Page, error) {
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
	lits, err := s.literals(pos)
	if err != nil {
		return source.Page{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := cond()
	var page source.Page
	err = s.snapshot(ctx, "read page", func(conn *sql.Conn) error {
		var err error
		page, err = s.readPage(ctx, conn, c, cursor, pos, high, lits, size)
		return err
	})
	if err != nil {
		return source.Page{}, err
	}
	return page, nil
}

// literals are the SQL literals of a cursor's key values.
func (s *Source) literals(pos position) ([]string, error) {
	var lits []string
	for k, kv := range pos {
		lit, ok := literal(kindOf(kv.Type), kv.Text)
		if !ok {
			return nil, fmt.Errorf("%s: %w: the value of %q is not a %s", s.id, source.ErrBadCursor, s.keys[k], kv.Type)
		}
		lits = append(lits, lit)
	}
	return lits, nil
}

// readPage reads the page at cursor of the rows that match cond ("": all
// rows; a slice's condition, built for an identity of type s.identType).
func (s *Source) readPage(ctx context.Context, conn *sql.Conn, cond, cursor string, pos position, high keyValue, lits []string, size int) (source.Page, error) {
	rows, err := conn.QueryContext(ctx, s.pageSQLWhere(cond, lits, size+1))
	if err != nil {
		return source.Page{}, err
	}
	defer rows.Close()
	r, err := s.columnsOf(rows)
	if err != nil {
		return source.Page{}, err
	}
	keyIdx, err := s.keyColumns(r)
	if err != nil {
		return source.Page{}, err
	}
	if cond != "" {
		for i, name := range r.names {
			if name == s.identity && r.types[i] != s.identType {
				return source.Page{}, fmt.Errorf("column %q changed type since the source was opened: %w", s.identity, source.ErrChanged)
			}
		}
	}
	for k, kv := range pos {
		if t := r.types[keyIdx[k]]; kv.Type != t {
			return source.Page{}, fmt.Errorf("column %q is now of type %s; the cursor was saved with type %s: %w",
				s.keys[k], t, kv.Type, source.ErrChanged)
		}
	}
	s.cursorType = r.types[keyIdx[0]]
	page := source.Page{Cursor: cursor, Records: make([]source.Record, 0, min(size, 4096))}
	last := pos
	more := false
	maybeTie := false // the row after the page may equal the last in a text key's collation
	sc := newScanner(len(r.names))
	for rows.Next() {
		if err := sc.scan(rows); err != nil {
			return source.Page{}, err
		}
		key := keyOf(r, keyIdx, sc)
		if len(page.Records) == size {
			// The row after the page: if it has the page's last key, the
			// keys are not unique and the next page would skip it.
			if sameKey(last, key) {
				return source.Page{}, s.tieError()
			}
			maybeTie = collatedOnly(last, key)
			more = true
			break
		}
		rec, err := s.record(r, sc.vals)
		if err != nil {
			return source.Page{}, fmt.Errorf("record %d of the page: %w", len(page.Records), err)
		}
		page.Records = append(page.Records, rec)
		last = key
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return source.Page{}, err
	}
	if maybeTie {
		// 'bob' and 'BOB' differ in bytes but are one value in a _ci
		// collation, which the next page's ">" compares in: ask the server
		// whether two rows hold the last key (an independent check,
		// 2026-12-04, skipped a row here without an error).
		lastLits, err := s.literals(last)
		if err != nil {
			return source.Page{}, err
		}
		var n int
		if err := conn.QueryRowContext(ctx, s.tieSQL(cond, lastLits)).Scan(&n); err != nil {
			return source.Page{}, err
		}
		if n > 1 {
			return source.Page{}, s.tieError()
		}
	}
	if high.Type != s.cursorType {
		high = keyValue{} // none, or the column changed type: this page begins the count
	}
	if more {
		if high.Type == "" && s.looksBack(s.cursorType) && s.identity != "" {
			// The first page of a pass that goes on: the largest key now
			// bounds the rows this pass may miss (see "Rows committed late").
			// Only with an identity: without one, a row's delivery key
			// holds its page's cursor, which must be the same when a run
			// reads the page again after a kill, whatever was written
			// since (docs/guide.md#what-a-run-does).
			top, err := s.lastAtOrBefore(ctx, conn, "", nil)
			if err != nil {
				return source.Page{}, err
			}
			if top != nil {
				high = top[0]
			}
		}
		page.Next = last.withHigh(high)
		return page, nil
	}
	page.Next = last.String()
	page.End = true
	var clock time.Time
	if s.lookback > 0 && r.types[keyIdx[0]] == "TIMESTAMP" {
		var now string
		if err := conn.QueryRowContext(ctx, "SELECT CAST(UTC_TIMESTAMP(6) AS CHAR)").Scan(&now); err != nil {
			return source.Page{}, err
		}
		if clock, err = time.Parse(myDatetimeLayout, now); err != nil {
			return source.Page{}, fmt.Errorf("the server's clock %q: %w", now, err)
		}
	}
	switch {
	case len(page.Records) > 0:
		page.Next = s.lookbackFrom(last, high, clock).String()
	case pos != nil && s.looksBack(pos[0].Type):
		// The page began where an earlier one of the pass stopped, or
		// where the last pass ended, and the rows read there, or the row
		// ahead of them, are gone (deleted, or their key moved back).
		// Moving back from the cursor itself would move back again on
		// every pass without rows; not moving back would leave unread the
		// rows committed late behind the earlier page's last row. So the
		// pass ends moved back from the last row at or before the cursor,
		// which the next pass reads again, and ends at again; without such
		// a row, at the start.
		from, err := s.lastAtOrBefore(ctx, conn, cond, lits)
		if err != nil {
			return source.Page{}, err
		}
		page.Next = ""
		if from != nil {
			page.Next = s.lookbackFrom(from, high, clock).String()
		}
	}
	if !s.keysNotNull {
		var nulls int64
		if err := conn.QueryRowContext(ctx, s.nullSQL).Scan(&nulls); err != nil {
			return source.Page{}, err
		}
		if nulls != 0 {
			return source.Page{}, fmt.Errorf("some rows have a NULL %s, which keyset pagination cannot read: make the column NOT NULL or COALESCE it in the query%s: %w",
				strings.Join(quoteAll(s.keys), " or "), source.FindWith(s.findNulls), source.ErrInvalid)
		}
	}
	return page, nil
}

var _ source.CursorKind = (*Source)(nil)

// CursorKind names the cursor column, its type as the last page read it
// ("" before any) and the lookback that applies to it.
func (s *Source) CursorKind() (column, typ, window string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, isInt := intLeast[s.cursorType]
	switch {
	case isTime(s.cursorType) && s.lookback > 0:
		window = fmt.Sprintf("cursor_lookback (%s)", s.lookback)
	case isInt && s.lookbackN > 0:
		window = fmt.Sprintf("cursor_lookback_values (%d)", s.lookbackN)
	}
	return s.keys[0], s.cursorType, window
}

func isTime(typ string) bool { return typ == "DATETIME" || typ == "TIMESTAMP" || typ == "DATE" }

// intLeast is the smallest value of each integer type a cursor can follow
// (UNSIGNED BIGINT past int64 is left as it is: IntLookback cannot read it).
var intLeast = map[string]int64{
	"TINYINT": math.MinInt8, "SMALLINT": math.MinInt16, "MEDIUMINT": -1 << 23, "INT": math.MinInt32, "BIGINT": math.MinInt64,
	"UNSIGNED TINYINT": 0, "UNSIGNED SMALLINT": 0, "UNSIGNED MEDIUMINT": 0, "UNSIGNED INT": 0, "UNSIGNED BIGINT": 0,
}

// looksBack reports whether a cursor_column of type typ is moved back at
// the end of a pass (lookbackFrom).
func (s *Source) looksBack(typ string) bool {
	_, isInt := intLeast[typ]
	return isTime(typ) && s.lookback > 0 || isInt && s.lookbackN > 0
}

// lastAtOrBefore returns the key of the last row that matches cond whose
// key is not after the literals lits (nil: the last row), nil when there is
// none.
func (s *Source) lastAtOrBefore(ctx context.Context, conn *sql.Conn, cond string, lits []string) (position, error) {
	rows, err := conn.QueryContext(ctx, s.atOrBeforeSQL(cond, lits))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	r, err := s.columnsOf(rows)
	if err != nil {
		return nil, err
	}
	keyIdx, err := s.keyColumns(r)
	if err != nil {
		return nil, err
	}
	var key position
	sc := newScanner(len(r.names))
	if rows.Next() {
		if err := sc.scan(rows); err != nil {
			return nil, err
		}
		key = keyOf(r, keyIdx, sc)
	}
	return key, rows.Err()
}

// keyOf is the key of the row sc scanned, its columns at keyIdx of r.
func keyOf(r result, keyIdx []int, sc *scanner) position {
	key := make(position, len(keyIdx))
	for k, i := range keyIdx {
		t, _ := text(r.kinds[i], sc.vals[i])
		key[k] = keyValue{Type: r.types[i], Text: t}
	}
	return key
}

// lookbackFrom is p with its cursor_column value, or the pass's high mark
// when that is lower, moved back: by the lookback and the type's smallest
// step when it is a DATETIME, TIMESTAMP or DATE (zero dates and values
// before the year 1000 stay as they are), by the values' lookback and one
// when it is an integer (the start of the source when that is below the
// type's smallest value); p otherwise. clock, the server's clock in UTC
// (zero: not read), bounds a TIMESTAMP's value.
func (s *Source) lookbackFrom(p position, high keyValue, clock time.Time) position {
	var text string
	switch p[0].Type {
	case "DATETIME", "TIMESTAMP":
		t, err := time.Parse(myDatetimeLayout, p[0].Text)
		if err != nil || s.lookback == 0 {
			return p
		}
		if h, err := time.Parse(myDatetimeLayout, high.Text); err == nil && high.Type == p[0].Type && h.Before(t) && h.Year() >= 1000 {
			t = h
		}
		if p[0].Type == "TIMESTAMP" && !clock.IsZero() && clock.Before(t) {
			t = clock
		}
		t = t.Add(-s.lookback - time.Microsecond)
		if t.Year() < 1000 {
			return p
		}
		text = t.Format("2006-01-02 15:04:05.000000")
	case "DATE":
		t, err := time.Parse(time.DateOnly, p[0].Text)
		if err != nil || s.lookback == 0 {
			return p
		}
		if h, err := time.Parse(time.DateOnly, high.Text); err == nil && high.Type == p[0].Type && h.Before(t) && h.Year() >= 1000 {
			t = h
		}
		t = t.Add(-s.lookback).AddDate(0, 0, -1)
		if t.Year() < 1000 {
			return p
		}
		text = t.Format(time.DateOnly)
	default:
		least, isInt := intLeast[p[0].Type]
		if !isInt || s.lookbackN == 0 {
			return p
		}
		from := p[0].Text
		if h, err := strconv.ParseInt(high.Text, 10, 64); err == nil && high.Type == p[0].Type {
			if v, err := strconv.ParseInt(from, 10, 64); err == nil && h < v {
				from = high.Text
			}
		}
		back, start, ok := source.IntLookback(from, s.lookbackN, least)
		switch {
		case !ok:
			return p
		case start:
			return nil
		}
		text = back
	}
	out := slices.Clone(p)
	out[0].Text = text
	return out
}

// tieError is the failure of two rows sharing the key at a page boundary.
func (s *Source) tieError() error {
	return fmt.Errorf("two rows share the key (%s) at a page boundary, so a page would skip rows: %s%s: %w",
		strings.Join(s.keys, ", "), s.uniqueHint(), source.FindWith(s.findTies), source.ErrInvalid)
}

// tieSQL counts (up to 2) the rows that match cond whose key equals the
// literals lits, compared as the page's keyset compares: in the columns'
// collations.
func (s *Source) tieSQL(cond string, lits []string) string {
	var b strings.Builder
	b.WriteString("SELECT COUNT(*) FROM (" + s.base)
	if cond != "" {
		b.WriteString(" AND (" + cond + ")")
	}
	for k, lit := range lits {
		b.WriteString(" AND " + col(s.keys[k]) + " = " + lit)
	}
	b.WriteString(" LIMIT 2) AS `tie`")
	return b.String()
}

// collatedOnly reports whether a and b differ only in text keys (CHAR,
// VARCHAR, TEXT, ENUM, SET), which a collation may compare equal although
// their bytes differ (case, accents, trailing spaces); every other key type
// prints one value one way.
func collatedOnly(a, b position) bool {
	if len(a) != len(b) {
		return false
	}
	differ := false
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		if t := a[i].Type; kindOf(t) != kindText || t == "DATE" || t == "TIME" || t != b[i].Type {
			return false
		}
		differ = true
	}
	return differ
}

func sameKey(a, b position) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
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
	err = s.snapshot(ctx, "null keys", func(conn *sql.Conn) error {
		return conn.QueryRowContext(ctx, s.nullSQL).Scan(&found)
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
// versionQuery, read in one consistent snapshot: the snapshot a partitioned
// run pins (docs/guide.md#the-checkpoint-barrier). An empty versionQuery means
//
//	SELECT COUNT(*), MAX(cursor_column) FROM <source>
//
// which changes when rows are added or removed or the cursor column grows
// (with cursor_column updated_at: on every update). The hash covers the
// result's column names and types and every value's text (NULL distinct from
// any text), length-prefixed, so two different results never hash alike.
func (s *Source) Version(ctx context.Context, versionQuery string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	q := s.versionSQL
	if v := strings.TrimRight(strings.TrimSpace(versionQuery), "; \t\r\n"); v != "" {
		q = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum string
	err := s.snapshot(ctx, "version query", func(conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		r, err := columnsOf(rows)
		if err != nil {
			return err
		}
		h := sha256.New()
		field := func(b string) {
			var n [8]byte
			binary.BigEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write([]byte(b))
		}
		field("oncesync-mysql-version-1")
		for i := range r.names {
			field(r.names[i])
			field(r.types[i])
		}
		sc := newScanner(len(r.names))
		for rows.Next() {
			if err := sc.scan(rows); err != nil {
				return err
			}
			field("row")
			for i, v := range sc.vals {
				t, ok := text(r.kinds[i], v)
				if !ok {
					h.Write([]byte{0})
					continue
				}
				h.Write([]byte{1})
				field(t)
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
