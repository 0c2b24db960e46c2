package mysql_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/source/mysql"
	"github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/testenv"
)

// isMariaDB reports whether the test server is MariaDB.
func (b *bundle) isMariaDB(t *testing.T) bool {
	return strings.Contains(b.queryStrings(t, "SELECT VERSION()")[0], "MariaDB")
}

// TestValues checks the documented mapping of MySQL types to Go values, with
// the server's session time zone overridden in the DSN: TIMESTAMP values
// read alike.
func TestValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t,
		`CREATE TABLE v (id BIGINT PRIMARY KEY, b BOOLEAN, i1 TINYINT, i2 SMALLINT, i3 MEDIUMINT, i4 INT, i8 BIGINT,
			u8 BIGINT UNSIGNED, u8small BIGINT UNSIGNED, u4 INT UNSIGNED, y YEAR, bt BIT(10),
			f4 FLOAT, f4big FLOAT, f4tenth FLOAT, f8 DOUBLE, f8mid DOUBLE, fbig DOUBLE, n DECIMAL(10,3), big DECIMAL(65,30), nneg DECIMAL(5,2),
			ts TIMESTAMP(6) NULL, dt DATETIME(1), dt0 DATETIME, dzero DATETIME, d DATE, tm TIME, j JSON,
			bin VARBINARY(10), bl BLOB, txt TEXT, vc VARCHAR(10), ch CHAR(3), en ENUM('sad', 'happy'), st SET('a', 'b', 'c'))`,
		`SET SESSION sql_mode = ''`,
		`INSERT INTO v VALUES (1, TRUE, -3, -32768, 8388607, 2147483647, 9223372036854775807,
			18446744073709551615, 42, 4294967295, 2024, b'1000000001',
			1.5, 16777215, 0.1, 0.1, 1234567, 1e300, 12.5, 123456789012345678901234567890.123456789, -0.5,
			'2024-05-01 10:34:56.123456', '2024-05-01 12:34:56.5', '2024-05-01 12:34:56', '0000-00-00 00:00:00', '2024-05-01', '-12:34:56',
			'{"a": [1, 2.50, "x"], "big": 12345678901234567890}',
			X'00ff10', X'00', 'Zoë "q"\n', 'short', 'ab ', 'happy', 'a,c')`,
		`INSERT INTO v (id) VALUES (2)`,
	)
	want := map[string]any{
		"id": int64(1), "b": int64(1), "i1": int64(-3), "i2": int64(-32768), "i3": int64(8388607), "i4": int64(2147483647),
		"i8": int64(9223372036854775807), "u8": json.Number("18446744073709551615"), "u8small": int64(42), "u4": int64(4294967295),
		"y": int64(2024), "bt": int64(513),
		// A FLOAT has every digit it holds, not the 6 the text protocol
		// prints (16777215 came as 1.67772e+07); a DOUBLE prints as
		// PostgreSQL prints it.
		"f4": json.Number("1.5"), "f4big": json.Number("1.6777215e+07"), "f4tenth": json.Number("0.1"),
		"f8": json.Number("0.1"), "f8mid": json.Number("1234567"), "fbig": json.Number("1e+300"),
		"n": json.Number("12.500"), "big": json.Number("123456789012345678901234567890.123456789000000000000000000000"), "nneg": json.Number("-0.50"),
		"ts": "2024-05-01T10:34:56.123456Z", "dt": "2024-05-01T12:34:56.5", "dt0": "2024-05-01T12:34:56", "dzero": "0000-00-00 00:00:00",
		"d": "2024-05-01", "tm": "-12:34:56",
		"j":   map[string]any{"a": []any{json.Number("1"), json.Number("2.50"), "x"}, "big": json.Number("12345678901234567890")},
		"bin": "AP8Q", "bl": "AA==", "txt": "Zoë \"q\"\n", "vc": "short", "ch": "ab", "en": "happy", "st": "a,c",
	}
	if b.isMariaDB(t) {
		// MariaDB's JSON is LONGTEXT: its text, as stored.
		want["j"] = `{"a": [1, 2.50, "x"], "big": 12345678901234567890}`
	} else {
		// MySQL normalises JSON (2.50 stays a decimal of scale 2).
		want["j"] = map[string]any{"a": []any{json.Number("1"), json.Number("2.50"), "x"}, "big": json.Number("12345678901234567890")}
	}
	for _, dsn := range []string{b.dsn, b.dsn + "?time_zone=%27%2B05%3A30%27"} {
		src := b.newSource(t, mysql.Params{DSN: dsn, Table: "v", CursorColumn: "id"})
		page, err := src.ReadPage(context.Background(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) != 2 {
			t.Fatalf("%d records, want 2", len(page.Records))
		}
		got := page.Records[0].Fields
		for k, w := range want {
			if g := got[k]; !reflect.DeepEqual(g, w) {
				t.Errorf("%s: %#v, want %#v", k, g, w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d fields, want %d", len(got), len(want))
		}
		for k, v := range page.Records[1].Fields {
			if k != "id" && v != nil {
				t.Errorf("NULL %s read as %#v", k, v)
			}
		}
	}
}

// TestValuesLikePostgres reads the same logical row from MySQL and from
// PostgreSQL (columns of the corresponding types) and checks that both
// sources give the same Go values, so a sync moved from one database to
// the other keys and sends its records alike.
func TestValuesLikePostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type column struct{ name, mysqlType, pgType, value string }
	cols := []column{
		{"id", "BIGINT PRIMARY KEY", "bigint PRIMARY KEY", "7"},
		{"small", "SMALLINT", "smallint", "-3"},
		{"i", "INT", "integer", "2147483647"},
		{"big", "BIGINT", "bigint", "9223372036854775807"},
		{"f8", "DOUBLE", "double precision", "0.1"},
		{"fbig", "DOUBLE", "double precision", "1e300"},
		{"fmid", "DOUBLE", "double precision", "1234567.5"},
		{"f15", "DOUBLE", "double precision", "1e15"},
		{"fsmall", "DOUBLE", "double precision", "0.00012"},
		{"f4", "FLOAT", "real", "16777215"},
		{"f4small", "FLOAT", "real", "0.1"},
		{"n", "DECIMAL(10,3)", "numeric(10,3)", "12.5"},
		{"nneg", "DECIMAL(10,2)", "numeric(10,2)", "-1234.5"},
		{"tz", "TIMESTAMP(6)", "timestamptz", "'2024-05-01 10:34:56.123456'"},
		{"local", "DATETIME(6)", "timestamp", "'2024-05-01 12:34:56.5'"},
		{"whole", "DATETIME", "timestamp", "'2024-05-01 12:34:56'"},
		{"d", "DATE", "date", "'2024-05-01'"},
		{"tm", "TIME", "time", "'12:34:56'"},
		{"u", "CHAR(36)", "uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"},
		{"txt", "TEXT", "text", "'Zoë \"q\" 李雷 🚀'"},
		{"vc", "VARCHAR(10)", "varchar(10)", "'short'"},
		{"bin", "VARBINARY(10)", "bytea", ""}, // binary literals differ; set below
		{"empty", "TEXT", "text", "''"},
		{"nothing", "TEXT", "text", "NULL"},
	}
	var myDefs, pgDefs, myVals, pgVals []string
	for _, c := range cols {
		myDefs = append(myDefs, c.name+" "+c.mysqlType)
		pgDefs = append(pgDefs, c.name+" "+c.pgType)
		switch c.name {
		case "bin":
			myVals = append(myVals, "X'00ff10'")
			pgVals = append(pgVals, `'\x00ff10'::bytea`)
		case "tz":
			myVals = append(myVals, c.value)
			pgVals = append(pgVals, c.value+"::timestamptz") // the session's zone is UTC
		default:
			myVals = append(myVals, c.value)
			pgVals = append(pgVals, c.value)
		}
	}
	b.exec(t, "CREATE TABLE same ("+strings.Join(myDefs, ", ")+")", "INSERT INTO same VALUES ("+strings.Join(myVals, ", ")+")")
	my := b.newSource(t, mysql.Params{Table: "same", CursorColumn: "id"})
	myPage, err := my.ReadPage(context.Background(), "", 10)
	if err != nil || len(myPage.Records) != 1 {
		t.Fatalf("mysql: %d records, %v", len(myPage.Records), err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pg, err := pgx.Connect(ctx, testenv.DatabaseURL())
	if err != nil {
		testenv.Unavailable(t, "PostgreSQL unreachable (set ONCESYNC_TEST_DATABASE_URL): %v", err)
	}
	schema := "mysqlsrc_" + testenv.RandHex(6)
	t.Cleanup(func() {
		_, _ = pg.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = pg.Close(context.Background())
	})
	for _, q := range []string{"CREATE SCHEMA " + schema, "SET TimeZone = 'UTC'",
		"CREATE TABLE " + schema + ".same (" + strings.Join(pgDefs, ", ") + ")",
		"INSERT INTO " + schema + ".same VALUES (" + strings.Join(pgVals, ", ") + ")"} {
		if _, err := pg.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pgSrc, err := postgres.New(ctx, postgres.Params{DSN: testenv.DatabaseURL(), Table: schema + ".same", CursorColumn: "id"})
	if err != nil {
		t.Fatal(err)
	}
	defer pgSrc.Close()
	pgPage, err := pgSrc.ReadPage(ctx, "", 10)
	if err != nil || len(pgPage.Records) != 1 {
		t.Fatalf("postgres: %d records, %v", len(pgPage.Records), err)
	}
	mine, theirs := myPage.Records[0].Fields, pgPage.Records[0].Fields
	for _, c := range cols {
		m, p := mine[c.name], theirs[c.name]
		if !reflect.DeepEqual(m, p) {
			t.Errorf("%s: MySQL %s gives %#v, PostgreSQL %s gives %#v", c.name, c.mysqlType, m, c.pgType, p)
		}
	}
	if len(mine) != len(cols) || len(theirs) != len(cols) {
		t.Errorf("fields: %d from MySQL, %d from PostgreSQL, want %d", len(mine), len(theirs), len(cols))
	}
}
