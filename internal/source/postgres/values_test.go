package postgres_test

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"testing"

	"github.com/oncesync/oncesync/internal/source/postgres"
)

// TestValues checks the documented mapping of PostgreSQL types to Go values,
// with the server's TimeZone UTC (the default) and Asia/Kolkata (set in the
// DSN): timestamps read alike.
func TestValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("v")
	b.exec(t,
		"CREATE TYPE "+b.table("mood")+" AS ENUM ('sad', 'happy')",
		`CREATE TABLE `+table+` (id bigint PRIMARY KEY, b boolean, i2 smallint, i4 integer, i8 bigint,
			f4 real, f8 double precision, fbig double precision, fnan double precision, n numeric(10,3), big numeric, ninf numeric,
			tz timestamptz, ts timestamp, tzinf timestamptz, d date, tm time, iv interval, u uuid, j json, jb jsonb,
			by bytea, txt text, vc varchar(10), ch char(3), arr integer[], en `+b.table("mood")+`, ip inet)`,
		`INSERT INTO `+table+` VALUES (1, true, -3, 2147483647, 9223372036854775807,
			1.5, 0.1, 1e300, 'NaN', 12.5, 123456789012345678901234567890.123456789, 'Infinity',
			'2024-05-01 12:34:56.123456+02', '2024-05-01 12:34:56.5', 'infinity', '2024-05-01', '12:34:56', '1 day 2 hours',
			'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2.50, "x"], "big": 12345678901234567890}', '{"k": null}',
			'\x00ff10', E'Zoë "q"\n', 'short', 'ab', '{1,2,3}', 'happy', '10.0.0.1/8')`,
		`INSERT INTO `+table+` (id) VALUES (2)`,
	)
	want := map[string]any{
		"id": int64(1), "b": true, "i2": int64(-3), "i4": int64(2147483647), "i8": int64(9223372036854775807),
		"f4": json.Number("1.5"), "f8": json.Number("0.1"), "fbig": json.Number("1e+300"), "fnan": "NaN",
		"n": json.Number("12.500"), "big": json.Number("123456789012345678901234567890.123456789"), "ninf": "Infinity",
		"tz": "2024-05-01T10:34:56.123456Z", "ts": "2024-05-01T12:34:56.5", "tzinf": "infinity",
		"d": "2024-05-01", "tm": "12:34:56", "iv": "1 day 02:00:00", "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
		"j":   map[string]any{"a": []any{json.Number("1"), json.Number("2.50"), "x"}, "big": json.Number("12345678901234567890")},
		"jb":  map[string]any{"k": nil},
		"by":  "AP8Q",
		"txt": "Zoë \"q\"\n", "vc": "short", "ch": "ab ", "arr": "{1,2,3}", "en": "happy", "ip": "10.0.0.1/8",
	}
	for _, dsn := range []string{b.dsn, b.withDSN(t, func(u *url.URL) {
		q := u.Query()
		q.Set("timezone", "Asia/Kolkata")
		u.RawQuery = q.Encode()
	})} {
		src := b.newSource(t, postgres.Params{DSN: dsn, Table: table, CursorColumn: "id"})
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
