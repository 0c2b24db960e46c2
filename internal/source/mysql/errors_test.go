package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/mysql"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
	"github.com/oncesync/oncesync/internal/testenv"
)

// secret is a password put in DSNs; it must never show.
const secret = "Pw-9zQ-s3cr3t"

// randomUser creates a user with password secret and no privileges,
// dropped at cleanup.
func (b *bundle) randomUser(t *testing.T) string {
	t.Helper()
	user := "mysrc_" + testenv.RandHex(6)
	b.exec(t, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, secret))
	t.Cleanup(func() {
		if _, err := b.admin.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)); err != nil {
			t.Errorf("drop user: %v", err)
		}
	})
	return user
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.loadRecords(t, "contacts", sourcetest.Records(5))
	b.exec(t, "CREATE TABLE floats (f FLOAT NOT NULL PRIMARY KEY)",
		// Sorted new, active, closed (their positions) but compared as
		// text: after 'new' a keyset would find nothing.
		"CREATE TABLE enums (id INT PRIMARY KEY, st ENUM('new', 'active', 'closed') NOT NULL, tags SET('b', 'a') NOT NULL)",
		"INSERT INTO enums VALUES (1, 'new', 'b'), (2, 'active', 'a'), (3, 'closed', 'a,b'), (4, 'new', '')")
	user := b.randomUser(t)
	tableUser := b.randomUser(t)
	b.exec(t, fmt.Sprintf("GRANT SELECT ON `%s`.floats TO '%s'@'%%'", strings.TrimPrefix(must(url.Parse(b.dsn)).Path, "/"), tableUser))
	withUser := func(name, pw string) string {
		return b.withDSN(t, func(u *url.URL) { u.User = url.UserPassword(name, pw) })
	}
	db := strings.TrimPrefix(must(url.Parse(b.dsn)).Path, "/")
	tests := []struct {
		name string
		p    mysql.Params
		want error
		// msg is a fragment of the error's text.
		msg string
	}{
		{"unreachable", mysql.Params{DSN: fmt.Sprintf("mysql://root:%s@127.0.0.1:%d/db", secret, testenv.RefusedPort(t)), Table: "contacts", CursorColumn: "id"},
			source.ErrUnavailable, "connect"},
		{"unreachable native DSN", mysql.Params{DSN: fmt.Sprintf("root:%s@tcp(127.0.0.1:%d)/db", secret, testenv.RefusedPort(t)), Table: "contacts", CursorColumn: "id"},
			source.ErrUnavailable, "connect"},
		{"bad DSN", mysql.Params{DSN: "mysql://root:" + secret + "@127.0.0.1:notaport/db", Table: "contacts", CursorColumn: "id"},
			source.ErrInvalid, "dsn cannot be parsed"},
		{"not a DSN", mysql.Params{DSN: "root:" + secret + "@127.0.0.1", Table: "contacts", CursorColumn: "id"},
			source.ErrInvalid, "dsn cannot be parsed"},
		// Refused credentials and grants are source_auth, whose next step
		// is the credentials, not the query.
		{"wrong password", mysql.Params{DSN: withUser(user, secret+"x"), Table: "contacts", CursorColumn: "id"},
			source.ErrAuth, "Access denied"},
		{"no privileges", mysql.Params{DSN: withUser(user, secret), Table: "contacts", CursorColumn: "id"},
			source.ErrAuth, "denied"},
		{"no SELECT on the table", mysql.Params{DSN: withUser(tableUser, secret), Table: "contacts", CursorColumn: "id"},
			source.ErrAuth, "error 1142"},
		{"syntax error", mysql.Params{DSN: withUser("root", ""), Query: "SELEC id FROM contacts", CursorColumn: "id"},
			source.ErrInvalid, "error 1064"},
		{"unknown table", mysql.Params{Table: "nope", CursorColumn: "id"},
			source.ErrInvalid, "error 1146"},
		{"unknown table in another database", mysql.Params{Table: db + "_other.contacts", CursorColumn: "id"},
			source.ErrInvalid, "error 1146"},
		{"unknown cursor column", mysql.Params{Table: "contacts", CursorColumn: "updated_at"},
			source.ErrInvalid, "Unknown column 'src.updated_at'"},
		{"unknown identity", mysql.Params{Table: "contacts", CursorColumn: "id", Identity: "uuid"},
			source.ErrInvalid, "Unknown column 'src.uuid'"},
		{"backtick in a column name", mysql.Params{Table: "contacts", CursorColumn: "id`; DROP TABLE contacts; --"},
			source.ErrInvalid, "Unknown column"},
		{"duplicate column names", mysql.Params{Query: "SELECT id, email AS name, name FROM contacts", CursorColumn: "id"},
			source.ErrInvalid, "Duplicate column name"},
		{"float key", mysql.Params{Table: "floats", CursorColumn: "f"},
			source.ErrInvalid, "FLOAT"},
		{"enum cursor column", mysql.Params{Table: "enums", CursorColumn: "st", Identity: "id"},
			source.ErrInvalid, "CAST(`st` AS CHAR)"},
		{"set identity", mysql.Params{Table: "enums", CursorColumn: "id", Identity: "tags"},
			source.ErrInvalid, "is an SET"},
		{"enum in a query", mysql.Params{Query: "SELECT * FROM enums", CursorColumn: "st", Identity: "id"},
			source.ErrInvalid, "is an ENUM"},
		{"query and table", mysql.Params{Query: "SELECT 1 AS id", Table: "contacts", CursorColumn: "id"},
			source.ErrInvalid, "not both"},
		{"neither query nor table", mysql.Params{CursorColumn: "id"},
			source.ErrInvalid, "set a query or a table"},
		{"no cursor column", mysql.Params{Table: "contacts"},
			source.ErrInvalid, "cursor_column"},
		{"bad table name", mysql.Params{Table: "a.b.c", CursorColumn: "id"},
			source.ErrInvalid, "database.name"},
		{"empty DSN", mysql.Params{DSN: " ", Table: "contacts", CursorColumn: "id"},
			source.ErrInvalid, "dsn is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.p.DSN == "" {
				tt.p.DSN = b.dsn
			}
			src, err := mysql.New(context.Background(), tt.p)
			if err == nil {
				_ = src.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error %q does not wrap %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
	// The table survived the backtick.
	if got := b.queryStrings(t, "SELECT COUNT(*) FROM contacts"); got[0] != "5" {
		t.Fatalf("contacts has %s rows", got[0])
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestReadPageErrors: what a run meets after New succeeded.
func TestReadPageErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	t.Run("NULL keys fail at the end", func(t *testing.T) {
		b.exec(t, "CREATE TABLE nulls (id BIGINT, v INT)", "INSERT INTO nulls VALUES (1, 1), (NULL, 2), (3, 3)")
		src := b.newSource(t, mysql.Params{Table: "nulls", CursorColumn: "id"})
		page, err := src.ReadPage(ctx, "", 1)
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("first page: %v, %v", page.Records, err)
		}
		_, err = src.ReadPage(ctx, page.Next, 10)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "NULL") {
			t.Fatalf("last page: %v, want ErrInvalid about NULL", err)
		}
	})
	t.Run("a tie without identity fails, never skips", func(t *testing.T) {
		b.exec(t, "CREATE TABLE tie (k INT NOT NULL, v INT)", "INSERT INTO tie VALUES (1, 1), (2, 2), (2, 3), (3, 4)")
		src := b.newSource(t, mysql.Params{Table: "tie", CursorColumn: "k"})
		page, err := src.ReadPage(ctx, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.ReadPage(ctx, page.Next, 1)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "share the key") {
			t.Fatalf("page at the tie: %v, want ErrInvalid", err)
		}
		// The message gives the query that finds them.
		_, q, _ := strings.Cut(err.Error(), "(find them with: ")
		q, _, _ = strings.Cut(q, "): ")
		var k, n int
		if err := b.admin.QueryRow(q).Scan(&k, &n); err != nil || k != 2 || n != 2 {
			t.Fatalf("the query %q: k=%d count=%d (%v), want k=2 twice", q, k, n, err)
		}
	})
	t.Run("a tie in the collation fails, never skips", func(t *testing.T) {
		// 'BOB@x.io' and 'bob@x.io' differ in bytes and are one value in a
		// _ci collation, which the next page's ">" compares in: the second
		// was skipped without an error (an independent check, 2026-12-04).
		// Values that differ in the collation too are read, all of them.
		b.exec(t, "CREATE TABLE ci (email VARCHAR(100) COLLATE utf8mb4_general_ci NOT NULL, v INT, KEY (email))",
			"INSERT INTO ci VALUES ('BOB@x.io', 1), ('bob@x.io', 2), ('carol@x.io', 3), ('Dave@x.io', 4), ('eve@x.io', 5)")
		src := b.newSource(t, mysql.Params{Table: "ci", CursorColumn: "email"})
		page, err := src.ReadPage(ctx, "", 1)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "share the key") {
			t.Fatalf("page at the tie: %v (read %v), want ErrInvalid", err, column(page.Records, "v"))
		}
		b.exec(t, "DELETE FROM ci WHERE v = 2")
		var vs []string
		for cursor := ""; ; {
			page, err := src.ReadPage(ctx, cursor, 1)
			if err != nil {
				t.Fatalf("after the tie was gone: %v", err)
			}
			vs = append(vs, column(page.Records, "v")...)
			if page.End {
				break
			}
			cursor = page.Next
		}
		if len(vs) != 4 {
			t.Fatalf("read v=%v; want the 4 rows", vs)
		}
	})
	t.Run("a cursor of another type", func(t *testing.T) {
		b.exec(t, "CREATE TABLE retyped (k INT NOT NULL PRIMARY KEY)", "INSERT INTO retyped VALUES (1), (2), (3)")
		src := b.newSource(t, mysql.Params{Table: "retyped", CursorColumn: "k"})
		page, err := src.ReadPage(ctx, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		b.exec(t, "ALTER TABLE retyped MODIFY k VARCHAR(10) NOT NULL")
		if _, err := src.ReadPage(ctx, page.Next, 1); !errors.Is(err, source.ErrChanged) {
			t.Fatalf("after ALTER: %v, want ErrChanged", err)
		}
		for _, bad := range []string{"x", "pg1:W1siaW50OCIsIjEiXV0", "my1:W1siQklHSU5UIiwiMSIsIjIiXV0", "my1:W1siSU5UIiwiMSBPUiAxPTEiXV0"} {
			if _, err := src.ReadPage(ctx, bad, 1); !errors.Is(err, source.ErrBadCursor) {
				t.Errorf("cursor %q: %v, want ErrBadCursor", bad, err)
			}
		}
	})
	t.Run("a record over max_record_bytes", func(t *testing.T) {
		b.exec(t, "CREATE TABLE wide (id INT PRIMARY KEY, body LONGTEXT)",
			"INSERT INTO wide VALUES (1, REPEAT('a', 100)), (2, REPEAT('b', 2000)), (3, REPEAT('c', 1100000))")
		small := b.newSource(t, mysql.Params{Table: "wide", CursorColumn: "id", MaxRecordBytes: 1000})
		page, err := small.ReadPage(ctx, "", 1)
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("small row: %v", err)
		}
		_, err = small.ReadPage(ctx, page.Next, 1)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "max_record_bytes (1000)") {
			t.Fatalf("2 KB row with a 1000-byte limit: %v, want ErrInvalid", err)
		}
		if strings.Contains(err.Error(), "bbbb") {
			t.Fatalf("the error quotes the value: %v", err)
		}
		// The default is 1 MiB: 2 KB passes, 1.1 MB does not.
		def := b.newSource(t, mysql.Params{Table: "wide", CursorColumn: "id"})
		page, err = def.ReadPage(ctx, "", 2)
		if err != nil || len(page.Records) != 2 {
			t.Fatalf("default limit, small rows: %v", err)
		}
		if _, err := def.ReadPage(ctx, page.Next, 2); !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "1048576") {
			t.Fatalf("default limit, 1.1 MB row: %v, want ErrInvalid", err)
		}
		if _, err := def.ReadIdentities(ctx, "id", []string{"3"}); !errors.Is(err, source.ErrInvalid) {
			t.Fatalf("ReadIdentities of the 1.1 MB row: %v, want ErrInvalid", err)
		}
	})
	t.Run("a killed connection is replaced", func(t *testing.T) {
		b.loadRecords(t, "kill", sourcetest.Records(10))
		src := b.newSource(t, mysql.Params{Table: "kill", CursorColumn: "id"})
		page, err := src.ReadPage(ctx, "", 5)
		if err != nil {
			t.Fatal(err)
		}
		ids := b.queryStrings(t, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()")
		if len(ids) == 0 {
			t.Fatal("the source's connection is not in the process list")
		}
		for _, id := range ids {
			b.exec(t, "KILL "+id)
		}
		rest, err := src.ReadPage(ctx, page.Next, 5)
		if err != nil || len(rest.Records) != 5 || fmt.Sprint(rest.Records[0].Fields["id"]) != "6" {
			t.Fatalf("after KILL: %v, %v", rest.Records, err)
		}
	})
}

// TestClassify maps driver errors to the source sentinels and keeps row
// values and the password out of messages.
func TestClassify(t *testing.T) {
	state := func(s string) [5]byte { var b [5]byte; copy(b[:], s); return b }
	tests := []struct {
		err      error
		want     error
		has, not string
	}{
		{&mysqldrv.MySQLError{Number: 1064, SQLState: state("42000"), Message: "You have an error in your SQL syntax"}, source.ErrInvalid, "error 1064, SQLSTATE 42000", ""},
		{&mysqldrv.MySQLError{Number: 1045, SQLState: state("28000"), Message: "Access denied for user 'u'@'h' (using password: YES) " + secret}, source.ErrAuth, "Access denied", secret},
		{&mysqldrv.MySQLError{Number: 1049, SQLState: state("42000"), Message: "Unknown database 'crm2'"}, source.ErrAuth, "Unknown database", ""},
		{&mysqldrv.MySQLError{Number: 1142, SQLState: state("42000"), Message: "SELECT command denied to user 'u'@'h' for table `db`.`contacts`"}, source.ErrAuth, "error 1142", ""},
		{&mysqldrv.MySQLError{Number: 1862, SQLState: state("HY000"), Message: "Your password has expired."}, source.ErrAuth, "expired", ""},
		{&mysqldrv.MySQLError{Number: 4151, SQLState: state("HY000"), Message: "Access denied, this account is locked"}, source.ErrAuth, "locked", ""},
		{mysqldrv.ErrCleartextPassword, source.ErrAuth, "clear text", ""},
		{&mysqldrv.MySQLError{Number: 1292, SQLState: state("22007"), Message: "Truncated incorrect DOUBLE value: 'ada@example.test'"}, source.ErrInvalid, "error 1292", "ada@"},
		{&mysqldrv.MySQLError{Number: 1366, SQLState: state("HY000"), Message: "Incorrect integer value: 'ada@example.test'"}, source.ErrInvalid, "error 1366", "ada@"},
		// SIGNAL in the query's function: the author's text may quote the row.
		{&mysqldrv.MySQLError{Number: 1644, SQLState: state("45000"), Message: "bad contact ada@example.test"}, source.ErrInvalid, "error 1644, SQLSTATE 45000", "ada@"},
		{&mysqldrv.MySQLError{Number: 1213, SQLState: state("40001"), Message: "Deadlock found"}, source.ErrUnavailable, "Deadlock", ""},
		{&mysqldrv.MySQLError{Number: 1053, SQLState: state("08S01"), Message: "Server shutdown in progress"}, source.ErrUnavailable, "shutdown", ""},
		{&mysqldrv.MySQLError{Number: 1969, SQLState: state("70100"), Message: "Query execution was interrupted (max_statement_time exceeded)"}, source.ErrUnavailable, "1969", ""},
		{&mysqldrv.MySQLError{Number: 1040, Message: "Too many connections"}, source.ErrUnavailable, "(error 1040)", ""},
		{mysqldrv.ErrInvalidConn, source.ErrUnavailable, "invalid connection", ""},
		{fmt.Errorf("dial tcp: connection refused (%s)", secret), source.ErrUnavailable, "refused", secret},
		{fmt.Errorf("bad: %w", source.ErrBadCursor), source.ErrBadCursor, "bad", ""},
	}
	for _, tt := range tests {
		err := mysql.Classify(context.Background(), secret, tt.err)
		if !errors.Is(err, tt.want) {
			t.Errorf("%v: %v does not wrap %v", tt.err, err, tt.want)
		}
		if !strings.Contains(err.Error(), tt.has) || (tt.not != "" && strings.Contains(err.Error(), tt.not)) {
			t.Errorf("%v: %q, want it to say %q and not %q", tt.err, err, tt.has, tt.not)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := mysql.Classify(ctx, "", mysqldrv.ErrInvalidConn); !errors.Is(err, context.Canceled) || errors.Is(err, source.ErrUnavailable) {
		t.Errorf("cancelled: %v, want context.Canceled only", err)
	}
}

// TestNullKeys: rows with a NULL key cannot be paged: reaching the end says
// so, and NullKeys (`oncesync check`) finds them before a run does.
func TestNullKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, "CREATE TABLE nullkeys (id BIGINT, updated_at DATETIME(6))",
		"INSERT INTO nullkeys VALUES (1, NOW(6)), (2, NOW(6)), (3, NULL)",
		"CREATE TABLE notnull (id BIGINT NOT NULL PRIMARY KEY, updated_at DATETIME(6) NOT NULL)")
	ctx := context.Background()
	src := b.newSource(t, mysql.Params{Table: "nullkeys", CursorColumn: "updated_at", Identity: "id"})
	if _, err := src.ReadPage(ctx, "", 10); !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "NULL") {
		t.Errorf("ReadPage: %v; want source.ErrInvalid about NULL keys", err)
	}
	if cols, found, err := src.NullKeys(ctx); err != nil || !found || !strings.Contains(cols, "updated_at") {
		t.Errorf("NullKeys = %q, %v, %v; want found, naming the columns", cols, found, err)
	}
	b.exec(t, "DELETE FROM nullkeys WHERE updated_at IS NULL")
	if _, found, err := src.NullKeys(ctx); err != nil || found {
		t.Errorf("NullKeys after the NULL was deleted: %v, %v", found, err)
	}
	nn := b.newSource(t, mysql.Params{Table: "notnull", CursorColumn: "updated_at", Identity: "id"})
	if _, found, err := nn.NullKeys(ctx); err != nil || found {
		t.Errorf("NullKeys of a NOT NULL table: %v, %v", found, err)
	}
}
