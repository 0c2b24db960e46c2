package config_test

import (
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

func TestSSLModeWarning(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dsn  string
		warn string // a part of the warning; "" = none
	}{
		{"postgres://u:pw@db.internal:5432/crm?sslmode=require", "sslmode=require does not verify"},
		{"postgres://u:pw@db.internal:5432/crm", "no sslmode"},
		{"postgres://u:pw@db.internal:5432/crm?sslmode=verify-ca", "verify-ca checks the server's certificate but not"},
		{"postgres://u:pw@db.internal:5432/crm?sslmode=verify-full", ""},
		{"postgres://u@127.0.0.1:5432/crm?sslmode=disable", ""},
		{"postgres://u@localhost/crm", ""},
		{"host=db.internal dbname=crm password=pw sslmode=prefer", "sslmode=prefer does not verify"},
		{"host=/var/run/postgresql dbname=crm", ""},
	}
	for _, c := range cases {
		got := config.SSLModeWarning(c.dsn)
		if (c.warn == "") != (got == "") || !strings.Contains(got, c.warn) {
			t.Errorf("SSLModeWarning(%q) = %q, want one containing %q", c.dsn, got, c.warn)
		}
		if strings.Contains(got, "pw") || strings.Contains(got, "db.internal") {
			t.Errorf("SSLModeWarning(%q) = %q names the dsn", c.dsn, got)
		}
	}
}

func TestWarningsNameTheField(t *testing.T) {
	t.Parallel()
	yaml := `store: postgres://o@db.internal/oncesync?sslmode=require
syncs:
  - id: s1
    source: {type: postgres, dsn: "postgres://r@crm.internal/crm?sslmode=verify-full", table: people, cursor_column: updated_at}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
  - id: s2
    source: {type: postgres, dsn: "postgres://r@crm.internal/crm", table: people, cursor_column: updated_at}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
`
	ws := warningsOf(t, yaml)
	if len(ws) != 2 || !strings.HasPrefix(ws[0], "store: sslmode=require") || !strings.HasPrefix(ws[1], "syncs[1].source.dsn: no sslmode") {
		t.Fatalf("warnings %q", ws)
	}
	// validate prints them as problems are printed: FILE:LINE: FIELD: MESSAGE.
	cfg, err := config.Parse("c.yaml", []byte(yaml), envMap(nil), kinds)
	if err != nil {
		t.Fatal(err)
	}
	ps := cfg.WarningProblems()
	if len(ps) != 2 || !strings.HasPrefix(ps[0].String(), "c.yaml:1: store: sslmode=require") ||
		!strings.HasPrefix(ps[1].String(), "c.yaml:8: syncs[1].source.dsn: no sslmode") {
		t.Fatalf("located warnings %q", ps)
	}
}

// TestWarningsFileWithoutIdentity: a file or Parquet source without an
// identity is warned about (its rows are known by their place); one with
// an identity, or a PostgreSQL source (keyed by its cursor and identity
// columns), is not.
func TestWarningsFileWithoutIdentity(t *testing.T) {
	t.Parallel()
	yaml := `store: sqlite://./o.db
syncs:
  - id: s1
    source: {type: csv, path: c.csv}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
  - id: s2
    source: {type: csv, path: c.csv, identity: id}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
  - id: s3
    source: {type: parquet, path: exports/}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
  - id: s4
    source: {type: postgres, dsn: "postgres://r@127.0.0.1/crm", table: people, cursor_column: updated_at, identity: id}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
`
	ws := warningsOf(t, yaml)
	if len(ws) != 2 || !strings.HasPrefix(ws[0], "syncs[0].source.identity: not set: rows are known by their place in the file,") ||
		!strings.HasPrefix(ws[1], "syncs[2].source.identity: not set: rows are known by their place in the files,") {
		t.Fatalf("warnings %q", ws)
	}
}

// warningsOf is the Warnings of the config yaml, which must parse.
func warningsOf(t *testing.T, yaml string) []string {
	t.Helper()
	cfg, err := config.Parse("c.yaml", []byte(yaml), envMap(nil), kinds)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Warnings()
}

// TestWarningsKeysetByIdentity: a postgres or mysql source whose pages
// follow its identity (cursor_column not set, or set to the identity) is
// warned about: updates are never read again; one paged by another column
// is not.
func TestWarningsKeysetByIdentity(t *testing.T) {
	t.Parallel()
	yaml := `store: sqlite://./o.db
syncs:
  - id: s1
    source: {type: postgres, dsn: "postgres://r@127.0.0.1/crm", table: people, identity: id}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
  - id: s2
    source: {type: mysql, dsn: "mysql://r@127.0.0.1/crm", table: people, identity: id, cursor_column: id}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
  - id: s3
    source: {type: mysql, dsn: "mysql://r@127.0.0.1/crm", table: people, identity: id, cursor_column: updated_at}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
`
	ws := warningsOf(t, yaml)
	if len(ws) != 2 || !strings.HasPrefix(ws[0], "syncs[0].source.cursor_column: pages follow the identity") ||
		!strings.HasPrefix(ws[1], "syncs[1].source.cursor_column: pages follow the identity") {
		t.Fatalf("warnings %q", ws)
	}
}

// TestWarningsMirrorOnASharedList: a mirror sync writing a list another
// sync of the same account writes takes off it the contacts the other's
// rows hold (an independent check, 2026-12-06). validate warns of it, for
// Brevo and Klaviyo; the same list id in another account is not shared.
func TestWarningsMirrorOnASharedList(t *testing.T) {
	t.Parallel()
	yaml := `store: sqlite://./o.db
syncs:
  - id: a
    source: {type: csv, path: a.csv, identity: id}
    destination: {type: brevo, api_key: k1, list_ids: [2, 3], write_mode: mirror}
    mapping: {email: email}
  - id: b
    source: {type: csv, path: b.csv, identity: id}
    destination: {type: brevo, api_key: k1, list_ids: [2]}
    mapping: {email: email}
  - id: other-account
    source: {type: csv, path: c.csv, identity: id}
    destination: {type: brevo, api_key: k2, list_ids: [3], write_mode: mirror}
    mapping: {email: email}
  - id: k1
    source: {type: csv, path: d.csv, identity: id}
    destination: {type: klaviyo, api_key: pk_abcdefabcdef, list_id: Xy12Ab, write_mode: mirror}
    mapping: {email: email}
  - id: k2
    source: {type: csv, path: e.csv, identity: id}
    destination: {type: klaviyo, api_key: pk_abcdefabcdef, list_id: Xy12Ab, write_mode: mirror}
    mapping: {email: email}
`
	ws := warningsOf(t, yaml)
	want := []string{
		"syncs[0].destination.write_mode: mirror takes contacts off Brevo list 2, which sync b writes too",
		"syncs[3].destination.write_mode: mirror takes contacts off Klaviyo list Xy12Ab, which sync k2 writes too",
		"syncs[4].destination.write_mode: mirror takes contacts off Klaviyo list Xy12Ab, which sync k1 writes too",
	}
	if len(ws) != len(want) {
		t.Fatalf("warnings %q, want %d", ws, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(ws[i], w) {
			t.Errorf("warning %d: %q, want %q", i, ws[i], w)
		}
	}
	for _, w := range ws {
		if strings.Contains(w, "k1,") || strings.Contains(w, "pk_") {
			t.Errorf("a warning holds a key: %q", w)
		}
	}
}
