package postgres_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/oncesync/oncesync/internal/source/postgres"
)

// TestMoneyTextDoesNotFollowTheSession: a money value's text follows
// lc_monetary ("$1,234.50" in C, "1.234,50 €" in de_DE), which a server's
// configuration, a role's or database's default, a DSN's options or
// another client's SET leaking through PgBouncer can set: the same row
// would read otherwise on another session and be sent again. Each read
// runs with lc_monetary C. (This machine has only the C locales, which all
// print money alike, so the test reads the setting the source's query
// sees, from a DSN that asks for another.)
func TestMoneyTextDoesNotFollowTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("money")
	b.exec(t,
		`CREATE TABLE `+table+` (id bigint PRIMARY KEY, m money)`,
		`INSERT INTO `+table+` VALUES (1, 1234.5)`,
	)
	u, err := url.Parse(b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += "options=-c%20lc_monetary%3DC.utf8"
	src := b.newSource(t, postgres.Params{DSN: u.String(), Query: "SELECT id, m, current_setting('lc_monetary') AS lcm FROM " + table, CursorColumn: "id"})
	page, err := src.ReadPage(context.Background(), "", 10)
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("read: %v, %d records", err, len(page.Records))
	}
	f := page.Records[0].Fields
	if f["lcm"] != "C" || f["m"] != "$1,234.50" {
		t.Errorf("lc_monetary %v, money %v: want C and $1,234.50 whatever the session's lc_monetary", f["lcm"], f["m"])
	}
}
