package mysql

import (
	"cmp"
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/source"
)

// Kind is the mysql source's part of the configuration: dsn, query or
// table, cursor_column and version_query under source:.
type Kind struct {
	// SetupTimeout bounds New's first connection and check (0:
	// connectTimeout); tests shorten it.
	SetupTimeout time.Duration
}

var _ config.CursorDescriber = (*Config)(nil)

// Config is a sync's mysql keys.
type Config struct {
	DSN          string
	Query, Table string
	CursorColumn string
	VersionQuery string
	// Lookback is cursor_lookback (source.DefaultLookback when not set).
	Lookback config.OptionalDuration
	// LookbackValues is cursor_lookback_values
	// (source.DefaultLookbackValues when not set).
	LookbackValues config.OptionalInt
}

func (Kind) Type() string               { return "mysql" }
func (Kind) NewSpec() config.SourceSpec { return &Config{} }
func (Kind) SourceKeys() []string {
	return []string{"dsn", "query", "table", "cursor_column", "version_query", "cursor_lookback", "cursor_lookback_values"}
}
func (Kind) SecretKeys() []string { return []string{"dsn"} }

// connectTimeout bounds New's first connection (it checks the query or
// table).
const connectTimeout = 30 * time.Second

// New connects a sync's mysql source.
func (k Kind) New(ctx context.Context, s config.Source, _ string) (source.Source, error) {
	c := s.Spec.(*Config)
	limit := cmp.Or(k.SetupTimeout, connectTimeout)
	limited, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	src, err := New(limited, Params{
		DSN: c.DSN, Query: c.Query, Table: c.Table,
		CursorColumn: c.CursorColumn, Identity: s.Identity, VersionQuery: c.VersionQuery, Lookback: c.Lookback.Or(source.DefaultLookback),
		LookbackValues: c.LookbackValues.Or(source.DefaultLookbackValues),
		MaxRecordBytes: s.MaxRecordBytes,
	})
	if err != nil {
		return nil, source.SetupTimedOut(ctx, limited, err, limit, setupHints)
	}
	return src, nil
}

// setupHints say what may hold a setup that ran out of time: a connection
// that never became a session, or a first query that got no answer.
var setupHints = source.SetupHints{
	Connect: "the server accepted the connection but sent no MySQL greeting: is the port in dsn a MySQL or MariaDB server's (usually 3306; 5432 is PostgreSQL's, 6379 Redis's), " +
		"or does a proxy or firewall hold the connection?",
	Query: "another session may hold a lock on the table (or on a table of the query): a LOCK TABLES, an ALTER TABLE, or a transaction left open holding its metadata lock; " +
		"SHOW PROCESSLIST shows who waits (Waiting for table metadata lock) and who holds it",
}

// DescribeCursor names the keyset a saved cursor follows:
// "after updated_at = 2024-05-01 10:00:00.000000, id = 42".
func (c *Config) DescribeCursor(s *config.Source, cursor string) string {
	if cursor == "" {
		return "start of the source"
	}
	identity := ""
	if s != nil {
		identity = s.Identity
	}
	cursorCol := c.CursorColumn
	if cursorCol == "" {
		cursorCol = identity // as New does
	}
	cols := []string{cursorCol}
	if identity != "" && identity != cursorCol {
		cols = append(cols, identity)
	}
	p, err := parseCursor(cursor, len(cols))
	if err != nil {
		return "a cursor this oncesync cannot read"
	}
	parts := make([]string, len(p))
	for i, kv := range p {
		parts[i] = cols[i] + " = " + kv.Text
	}
	return "after " + strings.Join(parts, ", ")
}

// KeysetColumn is cursor_column as written (config.Keyset).
func (c *Config) KeysetColumn() string { return c.CursorColumn }

func (c *Config) Decode(key string, v config.Value) {
	switch key {
	case "dsn":
		c.DSN = v.String()
	case "query":
		c.Query = v.String()
	case "table":
		c.Table = v.String()
	case "cursor_column":
		c.CursorColumn = v.String()
	case "version_query":
		c.VersionQuery = v.String()
	case "cursor_lookback":
		c.Lookback.Decode(v)
	case "cursor_lookback_values":
		c.LookbackValues.Decode(v)
	}
}

var (
	sqlTableRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$`)
	sqlColumnRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)
)

func (c *Config) Check(src *config.Source, k *config.Checker) {
	if k.Required("source.dsn", c.DSN, "is required for mysql sources") {
		if msg := checkDSN(c.DSN); msg != "" {
			k.Report("source.dsn", msg)
		}
	}
	hasQ, hasT := strings.TrimSpace(c.Query) != "", strings.TrimSpace(c.Table) != ""
	switch {
	case hasQ && hasT:
		k.Report("source.table", "set query or table, not both")
	case !hasQ && !hasT:
		if !k.Bad("source.query") && !k.Bad("source.table") {
			k.Report("source.query", "mysql sources need a query or a table"+k.EmptyHint("source.query")+k.EmptyHint("source.table"))
		}
	case hasT && !sqlTableRE.MatchString(c.Table):
		k.Report("source.table", "must be a table name like contacts or crm.contacts, got "+k.Show("source.table", c.Table))
	}
	if k.Has("source.cursor_column") && !sqlColumnRE.MatchString(c.CursorColumn) {
		k.Report("source.cursor_column", "must be a column name (letters, digits, _), got "+k.Show("source.cursor_column", c.CursorColumn))
	}
	k.Keyset("mysql", c.CursorColumn, src)
	if c.Lookback.Set && c.Lookback.D < 0 {
		k.Report("source.cursor_lookback", "must be 0 (off) or a duration like 5m, got "+c.Lookback.String())
	}
	if c.LookbackValues.Set && c.LookbackValues.N < 0 {
		k.Report("source.cursor_lookback_values", "must be 0 (off) or a number of values like 1000, got "+c.LookbackValues.String())
	}
}

// checkDSN accepts a mysql:// or mariadb:// URL or the driver's DSN, and
// never echoes it.
func checkDSN(dsn string) string {
	dsn = strings.TrimSpace(dsn)
	if strings.Contains(dsn, "://") {
		if msg := config.CheckURL(dsn, "mysql", "mariadb"); msg != "" {
			return msg
		}
	}
	if _, err := ParseDSN(dsn); errors.Is(err, errCharset) {
		return "sets a charset or collation other than utf8mb4 (records are UTF-8): leave them out"
	} else if err != nil {
		return "must be a mysql:// URL (mysql://user:pass@host:3306/db) or the driver's DSN (user:pass@tcp(host:3306)/db)"
	}
	return ""
}

// Secrets are the DSN's password (and secret-like URL parameters).
func (c *Config) Secrets() []string {
	if strings.Contains(c.DSN, "://") {
		return config.DSNSecrets(c.DSN)
	}
	if cfg, err := ParseDSN(c.DSN); err == nil && cfg.Passwd != "" {
		return []string{cfg.Passwd}
	}
	return nil
}

func (c *Config) Redacted() config.SourceSpec {
	r := *c
	r.DSN = redactDSN(c.DSN)
	return &r
}

// redactDSN hides the password of a URL or of the driver's DSN
// (user:password@tcp(...)/db).
func redactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		return config.RedactDSN(dsn)
	}
	cfg, err := ParseDSN(dsn)
	if err != nil || cfg.Passwd == "" {
		return dsn
	}
	// The driver's DSN is user:password@...: the password runs from the
	// first ':' to the last '@' before the database's '/'.
	slash := strings.LastIndexByte(dsn, '/')
	at := strings.LastIndexByte(dsn[:max(slash, 0)], '@')
	colon := strings.IndexByte(dsn, ':')
	if at < 0 || colon < 0 || colon > at {
		return "xxxxx"
	}
	return dsn[:colon+1] + "xxxxx" + dsn[at:]
}

// Definition puts its keys after the common ones, as stored definitions
// have them.
func (c *Config) Definition(common []config.Field) []config.Field {
	out := common
	for _, f := range []config.Field{{Key: "dsn", Value: c.DSN}, {Key: "query", Value: c.Query}, {Key: "table", Value: c.Table},
		{Key: "cursor_column", Value: c.CursorColumn}, {Key: "version_query", Value: c.VersionQuery}, {Key: "cursor_lookback", Value: c.Lookback.String()},
		{Key: "cursor_lookback_values", Value: c.LookbackValues.String()}} {
		if f.Value != "" {
			out = append(out, f)
		}
	}
	return out
}
