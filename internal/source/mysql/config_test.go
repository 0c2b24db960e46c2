package mysql_test

import (
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/source/mysql"
)

func noEnv(string) (string, bool) { return "", false }

// TestConfigProblems: the mysql keys' checks, as oncesync validate prints
// them, never echoing the DSN.
func TestConfigProblems(t *testing.T) {
	t.Parallel()
	yaml := `syncs:
  - id: s1
    source: {type: mysql, table: contacts, identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s2
    source: {type: mysql, dsn: "mysql://db/crm", identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s3
    source: {type: mysql, dsn: "mysql://u:` + secret + `@db/crm", query: select 1, table: t}
    destination: {type: webhook, url: https://example.com/h}
  - id: s4
    source: {type: mysql, dsn: "postgres://u:` + secret + `@db/crm", table: "t; drop table x", cursor_column: "a b", path: x.csv}
    destination: {type: webhook, url: https://example.com/h}
  - id: s5
    source: {type: mysql, dsn: "u:` + secret + `@db/crm", table: t}
    destination: {type: webhook, url: https://example.com/h}
  - id: s6
    source: {type: mysql, dsn: "mysql://u:` + secret + `@db/crm?charset=latin1", table: t}
    destination: {type: webhook, url: https://example.com/h}
`
	_, err := config.Parse("oncesync.yaml", []byte(yaml), noEnv, connector.Default().Kinds())
	if err == nil {
		t.Fatal("want problems")
	}
	for _, want := range []string{
		`oncesync.yaml:3: syncs[0].source.dsn: is required for mysql sources`,
		`oncesync.yaml:6: syncs[1].source.query: mysql sources need a query or a table`,
		`oncesync.yaml:9: syncs[2].source.table: set query or table, not both`,
		`oncesync.yaml:12: syncs[3].source.dsn: must be a URL starting with mysql:// or mariadb://, got postgres://`,
		`oncesync.yaml:12: syncs[3].source.table: must be a table name like contacts or crm.contacts, got "t; drop table x"`,
		`oncesync.yaml:12: syncs[3].source.cursor_column: must be a column name (letters, digits, _), got "a b"`,
		`oncesync.yaml:12: syncs[3].source.path: is not used by mysql sources`,
		`oncesync.yaml:15: syncs[4].source.dsn: must be a mysql:// URL`,
		`oncesync.yaml:18: syncs[5].source.dsn: sets a charset or collation other than utf8mb4`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%s", want, err)
		}
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("problems show the password:\n%s", err)
	}
}

// TestConfigSecrets: the DSN's password, in a URL or in the driver's DSN,
// is a secret: listed for scrubbing, absent from the redacted sync and its
// stored definition.
func TestConfigSecrets(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"mysql://reader:" + secret + "@127.0.0.1:3306/crm?tls=preferred",
		"reader:" + secret + "@tcp(127.0.0.1:3306)/crm?parseTime=true",
		"reader:" + secret + ":with@colon@tcp(127.0.0.1:3306)/crm",
	} {
		yaml := `syncs:
  - id: s1
    source: {type: mysql, dsn: "` + dsn + `", table: people, cursor_column: updated_at, identity: id, version_query: "SELECT 1"}
    destination: {type: webhook, url: https://example.com/h}
`
		cfg, err := config.Parse("oncesync.yaml", []byte(yaml), noEnv, connector.Default().Kinds())
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		found := false
		for _, s := range cfg.SecretValues() {
			found = found || strings.Contains(s, "Pw-9zQ")
		}
		if !found {
			t.Errorf("%s: the password is not among the secrets %d", dsn, len(cfg.SecretValues()))
		}
		r := cfg.Syncs[0].Redacted()
		spec := r.Source.Spec.(*mysql.Config)
		if strings.Contains(spec.DSN, "Pw-9zQ") || !strings.Contains(spec.DSN, "reader") || !strings.Contains(spec.DSN, "crm") {
			t.Errorf("redacted DSN %q", spec.DSN)
		}
		def, err := cfg.Syncs[0].DefinitionJSON()
		if err != nil || strings.Contains(def, "Pw-9zQ") || !strings.Contains(def, "version_query") || !strings.Contains(def, "people") {
			t.Errorf("definition %s, %v", def, err)
		}
	}
	if got := mysql.RedactDSN("reader@tcp(db:3306)/crm"); got != "reader@tcp(db:3306)/crm" {
		t.Errorf("a DSN without password redacts to %q", got)
	}
}

func TestParseDSN(t *testing.T) {
	t.Parallel()
	cfg, err := mysql.ParseDSN("mysql://rea%40der:p%2Fw@db.example:3307/crm?tls=skip-verify&timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "rea@der" || cfg.Passwd != "p/w" || cfg.Addr != "db.example:3307" || cfg.DBName != "crm" || cfg.TLSConfig != "skip-verify" || cfg.Timeout.String() != "3s" {
		t.Fatalf("parsed %+v", cfg)
	}
	cfg, err = mysql.ParseDSN("mariadb://root@[::1]/")
	if err != nil || cfg.Addr != "[::1]:3306" || cfg.DBName != "" || cfg.User != "root" {
		t.Fatalf("parsed %+v, %v", cfg, err)
	}
	for _, ok := range []string{"mysql://db/crm?charset=utf8mb4", "u@tcp(db)/crm?collation=utf8mb4_bin"} {
		if _, err := mysql.ParseDSN(ok); err != nil {
			t.Errorf("ParseDSN(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"http://db/crm", "mysql:///crm", "mysql://db/a/b", "mysql://db/crm?timeout=forever", "nonsense",
		"mysql://db/crm?charset=latin1", "u@tcp(db)/crm?collation=latin1_swedish_ci", "mysql://db/crm?charset=utf8mb4,latin1"} {
		if _, err := mysql.ParseDSN(bad); err == nil {
			t.Errorf("ParseDSN(%q) succeeded", bad)
		}
	}
}
