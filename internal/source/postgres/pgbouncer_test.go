package postgres_test

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"testing"

	"github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestBehindPgBouncer: teams put PgBouncer in front of the database a sync
// reads. PgBouncer refuses a connection whose startup packet names a
// setting it does not track ("unsupported startup parameter: IntervalStyle"),
// in every pool mode, so such a source never connected. In transaction mode
// settings made once per connection would land on other clients' sessions:
// the value-shaping ones are made in each read's own transaction. A role whose
// defaults differ (set by a DBA) still reads the documented values.
func TestBehindPgBouncer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("pgb")
	role := b.schema + "_reader"
	b.exec(t,
		`CREATE TABLE `+table+` (id bigint PRIMARY KEY, iv interval, by bytea, f8 double precision, tz timestamptz)`,
		`INSERT INTO `+table+` VALUES (1, '1 day 2 hours', '\x00ff10', 0.1, '2024-05-01 12:34:56.123456+02')`,
		`CREATE ROLE `+role+` LOGIN`,
		`ALTER ROLE `+role+` SET IntervalStyle = 'iso_8601'`,
		`ALTER ROLE `+role+` SET bytea_output = 'escape'`,
		`ALTER ROLE `+role+` SET extra_float_digits = -3`,
		`ALTER ROLE `+role+` SET TimeZone = 'Asia/Kolkata'`,
		`GRANT USAGE ON SCHEMA `+b.schema+` TO `+role,
		`GRANT SELECT ON `+table+` TO `+role,
	)
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		ctx := context.Background()
		for _, sql := range []string{"REVOKE ALL ON " + table + " FROM " + role, "REVOKE ALL ON SCHEMA " + b.schema + " FROM " + role, "DROP ROLE " + role} {
			if _, err := b.admin.Exec(ctx, sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
	})
	want := map[string]any{
		"id": int64(1), "iv": "1 day 02:00:00", "by": "AP8Q", "f8": json.Number("0.1"), "tz": "2024-05-01T10:34:56.123456Z",
	}
	asRole := func(dsn string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role)
		return u.String()
	}
	for _, mode := range []string{"session", "transaction"} {
		t.Run(mode, func(t *testing.T) {
			dsn := testenv.PgBouncer(t, asRole(b.dsn), mode)
			src := b.newSource(t, postgres.Params{DSN: dsn, Table: table, CursorColumn: "id"})
			for i := range 3 { // reads land on whichever server session PgBouncer gives
				page, err := src.ReadPage(context.Background(), "", 10)
				if err != nil {
					t.Fatalf("read %d behind PgBouncer (%s): %v", i, mode, err)
				}
				if len(page.Records) != 1 || !reflect.DeepEqual(page.Records[0].Fields, want) {
					t.Fatalf("read %d: %#v, want %#v", i, page.Records, want)
				}
			}
		})
	}
	// The same role read directly: the role's defaults do not shape values.
	src := b.newSource(t, postgres.Params{DSN: asRole(b.dsn), Table: table, CursorColumn: "id"})
	page, err := src.ReadPage(context.Background(), "", 10)
	if err != nil || len(page.Records) != 1 || !reflect.DeepEqual(page.Records[0].Fields, want) {
		t.Fatalf("direct read: %#v, %v; want %#v", page.Records, err, want)
	}
}
