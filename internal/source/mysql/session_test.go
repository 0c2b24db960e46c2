package mysql_test

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source/mysql"
)

// TestCharValuesIgnoreServerSQLMode reads CHAR values on a session whose
// sql_mode has PAD_CHAR_TO_FULL_LENGTH, as a server's my.cnf (sql_mode in
// [mysqld]) or a DSN can set it: the same row must read as on any other
// server, its trailing spaces stripped as documented, or every row with a
// CHAR column is sent again when the sync moves to (or fails over to) a
// server configured otherwise. The session's other modes are kept: the
// query may depend on them.
func TestCharValuesIgnoreServerSQLMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t,
		"CREATE TABLE ch (code CHAR(5) NOT NULL, id BIGINT PRIMARY KEY, name CHAR(10), note VARCHAR(10))",
		"INSERT INTO ch VALUES ('ab', 1, 'Ada', 'x  '), ('cd', 2, NULL, 'y'), ('ef', 3, 'Émile', '')",
	)
	padded := b.withDSN(t, func(u *url.URL) {
		q := u.Query()
		q.Set("sql_mode", "'PIPES_AS_CONCAT,PAD_CHAR_TO_FULL_LENGTH'")
		u.RawQuery = q.Encode()
	})
	read := func(dsn string) []map[string]any {
		src := b.newSource(t, mysql.Params{DSN: dsn, Table: "ch", CursorColumn: "code", Identity: "id"})
		recs, _ := readAll(t, src, "", 2)
		out := make([]map[string]any, len(recs))
		for i, r := range recs {
			out[i] = r.Fields
		}
		return out
	}
	want := read(b.dsn)
	if got := want[0]["code"]; got != "ab" {
		t.Fatalf("default sql_mode: code %#v, want \"ab\"", got)
	}
	if got := read(padded); !reflect.DeepEqual(got, want) {
		t.Errorf("with PAD_CHAR_TO_FULL_LENGTH in the session's sql_mode:\n got %#v\nwant %#v", got, want)
	}

	// The DSN's other modes still apply to the query.
	src := b.newSource(t, mysql.Params{DSN: padded, Query: "SELECT 1 AS id, 'a' || 'b' AS ab, @@SESSION.sql_mode AS m", Identity: "id"})
	page, err := src.ReadPage(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	f := page.Records[0].Fields
	if f["ab"] != "ab" || f["m"] != "PIPES_AS_CONCAT" {
		t.Errorf("query on the DSN's sql_mode: ab %#v, sql_mode %#v; want \"ab\", \"PIPES_AS_CONCAT\"", f["ab"], f["m"])
	}
}

// TestDecimalZerofill reads DECIMAL ZEROFILL columns (a legacy table's
// amounts and codes): MySQL prints them padded with zeros ("000012.50"),
// which is no JSON number; the record holds the DECIMAL as documented, a
// JSON number with the column's scale, as the same column without
// ZEROFILL reads. A ZEROFILL key still pages and re-reads by identity.
func TestDecimalZerofill(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t,
		"CREATE TABLE zf (id DECIMAL(8,2) ZEROFILL PRIMARY KEY, amount DECIMAL(10,3) ZEROFILL, plain DECIMAL(10,3) UNSIGNED, whole DECIMAL(6,0) ZEROFILL)",
		"INSERT INTO zf VALUES (1.5, 12.5, 12.5, 7), (12.25, 0, 0, 0), (123456.75, 1234567.125, 1234567.125, 999999), (0.01, NULL, NULL, NULL)",
	)
	src := b.newSource(t, mysql.Params{Table: "zf", Identity: "id"})
	recs, _ := readAll(t, src, "", 2)
	want := []map[string]any{
		{"id": json.Number("0.01"), "amount": nil, "plain": nil, "whole": nil},
		{"id": json.Number("1.50"), "amount": json.Number("12.500"), "plain": json.Number("12.500"), "whole": json.Number("7")},
		{"id": json.Number("12.25"), "amount": json.Number("0.000"), "plain": json.Number("0.000"), "whole": json.Number("0")},
		{"id": json.Number("123456.75"), "amount": json.Number("1234567.125"), "plain": json.Number("1234567.125"), "whole": json.Number("999999")},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if !reflect.DeepEqual(r.Fields, want[i]) {
			t.Errorf("record %d: %#v, want %#v", i, r.Fields, want[i])
		}
	}

	// Re-read by identity, as the identity renders in a record.
	got, err := src.ReadIdentities(context.Background(), "id", []string{"1.50", "123456.75"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.Fields["id"].(json.Number).String())
	}
	if strings.Join(ids, " ") != "1.50 123456.75" && strings.Join(ids, " ") != "123456.75 1.50" {
		t.Errorf("ReadIdentities: %v, want [1.50 123456.75]", ids)
	}
}
