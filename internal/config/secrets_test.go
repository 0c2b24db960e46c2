package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

func TestSecretsNeverInErrors(t *testing.T) {
	t.Parallel()
	const envSecret = "xkeysib-ENV-SUPERSECRET-123"
	const literal = "xkeysib-LITERAL-SUPERSECRET-456"
	// ${S} lands in every kind of field that can be wrong; literal secrets
	// sit in secret fields next to problems.
	yaml := `store: ${S}
redis: ${S}
settings: {lease_ttl: "${S}", breaker_failures: "${S}"}
alerts:
  webhook: {url: "${S}", secret: ` + literal + `}
  email: {host: h, from: "${S}", to: ["${S}"], password: ` + literal + `}
  sentry: {dsn: "${S}"}
web: {listen: "${S}", api_tokens: [` + literal + `]}
allow_evicting_redis: ${S}
syncs:
  - id: "${S}"
    workspace: "${S}"
    schedule: "${S}"
    partitions: ${S}
    ledger_retention: ${S}
    source: {type: "${S}", page_size: "${S}"}
    destination: {type: brevo, base_url: "${S}", api_key: ` + literal + `, mode: "${S}", list_ids: ["${S}"], timeout: "${S}", rate_limit: "${S}", concurrency: "${S}"}
    mapping: {email: e}
  - id: s2
    source: {type: postgres, dsn: "${S}", table: "${S}", cursor_column: "${S}"}
    destination: {type: webhook, url: "${S}", secret: ` + literal + `, headers: {X-Key: ` + literal + `}}
  - id: s3
    source: {type: postgres, dsn: "postgres://u:` + literal + `@db:5432/x", query: q, path: p}
    destination: {type: webhook, url: "ftp://u:` + literal + `@host/x"}
`
	_, err := config.Parse("s.yaml", []byte(yaml), envMap(map[string]string{"S": envSecret}), kinds)
	if err == nil {
		t.Fatal("want problems")
	}
	msg := err.Error()
	for _, secret := range []string{envSecret, literal, "SUPERSECRET"} {
		if strings.Contains(msg, secret) {
			t.Errorf("error leaks %q:\n%s", secret, msg)
		}
	}
	// Every field above has a problem; make sure they were all reported (so
	// this test looks at real messages), and that values from the
	// environment are named, not shown.
	if n := strings.Count(msg, "\n") + 1; n < 25 {
		t.Errorf("want at least 25 problems, got %d:\n%s", n, msg)
	}
	for _, want := range []string{
		"s.yaml:16: syncs[0].source.type: unknown source type the value of ${S} (valid: csv, jsonl, postgres, mysql, parquet, shopify)",
		"s.yaml:13: syncs[0].schedule: is not a valid cron expression",
		"s.yaml:1: store: must be a sqlite:// or postgres:// URL",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("testdata/full.yaml", envMap(specEnv), kinds)
	if err != nil {
		t.Fatal(err)
	}
	orig := cfg.Syncs[1]
	r := orig.Redacted()
	if webhookOf(r).Secret != "" || webhookOf(r).Headers["Authorization"] != "" || len(webhookOf(r).Headers) != 1 {
		t.Errorf("webhook not redacted: %+v", r.Destination)
	}
	webhookOf(r).Fields["event"] = "changed"
	if webhookOf(orig).Headers["Authorization"] != "Bearer evtok-s3cret" || webhookOf(orig).Secret != "evwh-s3cret" || webhookOf(orig).Fields["event"] != "name" {
		t.Errorf("Redacted must not touch the original: %+v", orig)
	}
	b := cfg.Syncs[0].Redacted()
	if brevoOf(b).APIKey != "" {
		t.Errorf("api key not blanked")
	}
	if want := "postgres://reader:xxxxx@crm.internal:5432/crm?sslmode=require"; pgOf(b).DSN != want {
		t.Errorf("dsn = %q, want %q", pgOf(b).DSN, want)
	}
	brevoOf(b).ListIDs[0] = 99
	if brevoOf(cfg.Syncs[0]).ListIDs[0] != 2 {
		t.Error("Redacted shares list_ids with the original")
	}

	tests := []struct{ dsn, want string }{
		{"host=db user=x password=se3cret dbname=crm", "host=db user=x password=xxxxx dbname=crm"},
		{"host=db password = 'with space' dbname=crm", "host=db password = xxxxx dbname=crm"},
		{"postgres://u:p%40ss@db/x?password=also", "postgres://u:xxxxx@db/x?password=xxxxx"},
		{"postgres://u@db/x", "postgres://u@db/x"},
		{"host=db dbname=crm", "host=db dbname=crm"},
		{"postgres://u@db/x?hapikey=hk1&sslmode=require", "postgres://u@db/x?hapikey=xxxxx&sslmode=require"},
		{"postgres://u@db/x?subscription-key=sk1", "postgres://u@db/x?subscription-key=xxxxx"},
	}
	for _, tt := range tests {
		if got := config.RedactDSN(tt.dsn); got != tt.want {
			t.Errorf("redactDSN(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
	if got := config.DSNSecrets("host=db password='it''s' x=1"); len(got) == 0 {
		t.Errorf("dsnSecrets found nothing")
	}
	if got := config.DSNSecrets("host=db password='with space'"); !slices.Equal(got, []string{"with space"}) {
		t.Errorf("dsnSecrets = %q", got)
	}
}

func TestSecretValues(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("testdata/full.yaml", envMap(specEnv), kinds)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.SecretValues()
	for name, v := range specEnv {
		if !slices.Contains(got, v) {
			t.Errorf("SecretValues misses %s", name)
		}
	}
	for _, v := range []string{"sentrykey-s3cret", "Bearer evtok-s3cret"} {
		if !slices.Contains(got, v) {
			t.Errorf("SecretValues misses %q", v)
		}
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("SecretValues not sorted and unique: %q", got)
	}
	for _, v := range got {
		if v == "" || v == "email" || v == "1000" || strings.Contains(v, "contacts") {
			t.Errorf("SecretValues holds a non-secret %q", v)
		}
	}
	// Every secret must be gone from every definition.
	for _, s := range cfg.Syncs {
		def, err := s.DefinitionJSON()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range got {
			if strings.Contains(def, v) {
				t.Errorf("definition of %s holds secret %q: %s", s.ID, v, def)
			}
		}
	}
}

func TestDefinitionJSON(t *testing.T) {
	t.Parallel()
	block := `syncs:
  - id: s1
    workspace: acme
    source:
      path: contacts.csv
      type: csv
    destination:
      list_ids: [2]
      api_key: ${KEY}
      type: brevo
    mapping:
      attributes:
        LASTNAME: last_name
        FIRSTNAME: first_name
      email: email
`
	flow := `syncs: [{id: s1, workspace: acme, source: {type: csv, path: contacts.csv}, mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}, destination: {type: brevo, api_key: "${KEY}", list_ids: [2]}}]`
	def := func(t *testing.T, yaml, key string) string {
		t.Helper()
		cfg, err := config.Parse("d.yaml", []byte(yaml), envMap(map[string]string{"KEY": key}), kinds)
		if err != nil {
			t.Fatal(err)
		}
		j, err := cfg.Syncs[0].DefinitionJSON()
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a := def(t, block, "xkeysib-one")
	const golden = `{"id":"s1","workspace":"acme","source":{"type":"csv","path":"contacts.csv","page_size":500},"destination":{"type":"brevo","base_url":"https://api.brevo.com/v3","mode":"bulk","list_ids":[2],"concurrency":4,"timeout":"30s","rate_limit":10},"mapping":{"email":"email","attributes":{"FIRSTNAME":"first_name","LASTNAME":"last_name"}},"partitions":1}`
	if a != golden {
		t.Errorf("definition changed:\ngot  %s\nwant %s", a, golden)
	}
	for i := 0; i < 20; i++ {
		if b := def(t, flow, "xkeysib-two"); b != a {
			t.Fatalf("same sync in another layout, key order or API key must give the same definition:\n%s\n%s", a, b)
		}
	}
	changed := def(t, strings.Replace(block, "path: contacts.csv", "path: other.csv", 1), "xkeysib-one")
	if changed == a {
		t.Error("a changed path must change the definition")
	}
	if strings.Contains(a, "xkeysib") {
		t.Error("definition holds the API key")
	}
}

// TestHeartbeatURL: docs/guide.md#telling-silence-from-outside's per-sync heartbeat_url is an http(s) URL
// whose path (the monitor's token) is a secret: never in a problem, in the
// stored definition or its redacted form; SecretValues lists it.
func TestHeartbeatURL(t *testing.T) {
	t.Parallel()
	const token = "5bd0c3f6-s3cret-hc-token"
	sync := func(hb string) string {
		return `syncs:
  - id: s1
    heartbeat_url: ` + hb + `
    source: {type: csv, path: c.csv}
    destination: {type: webhook, url: "http://127.0.0.1:9/hook"}
`
	}
	cfg, err := config.Parse("h.yaml", []byte(sync(`"https://hc-ping.com/${HC}?rid=`+token+`"`)), envMap(map[string]string{"HC": token}), kinds)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Syncs[0]
	if s.HeartbeatURL != "https://hc-ping.com/"+token+"?rid="+token {
		t.Fatalf("heartbeat_url = %q", s.HeartbeatURL)
	}
	if r := s.Redacted().HeartbeatURL; r != "https://hc-ping.com/xxxxx" {
		t.Errorf("redacted heartbeat_url = %q", r)
	}
	def, err := s.DefinitionJSON()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(def, token) || !strings.Contains(def, `"heartbeat_url":"https://hc-ping.com/xxxxx"`) {
		t.Errorf("definition %s", def)
	}
	if !slices.Contains(cfg.SecretValues(), token) {
		t.Errorf("SecretValues misses the heartbeat token: %q", cfg.SecretValues())
	}
	// A monitor whose URL ends in the job's name (Cronitor's): the
	// segment that is the sync's id is no secret, or every log line and
	// the dead-man's alert would say "[redacted]" for the silent sync.
	named, err := config.Parse("h.yaml", []byte(`syncs:
  - id: silentfail
    heartbeat_url: "https://cronitor.link/p/`+token+`/silentfail"
    source: {type: csv, path: c.csv}
    destination: {type: webhook, url: "http://127.0.0.1:9/hook"}
`), envMap(nil), kinds)
	if err != nil {
		t.Fatal(err)
	}
	if sv := named.SecretValues(); slices.Contains(sv, "silentfail") || !slices.Contains(sv, token) {
		t.Errorf("SecretValues of a URL ending in the sync's id = %q: want its token, not the id", sv)
	}
	// Another token, same monitor host: the definition does not change
	// (like an API key), so the sync's changed_at does not move.
	other, err := config.Parse("h.yaml", []byte(sync("https://hc-ping.com/another-token-entirely")), envMap(nil), kinds)
	if err != nil {
		t.Fatal(err)
	}
	otherDef, _ := other.Syncs[0].DefinitionJSON()
	if otherDef != def {
		t.Errorf("a new heartbeat token changed the definition:\n%s\n%s", def, otherDef)
	}

	for _, bad := range []string{"ftp://hc-ping.com/" + token, "hc-ping.com/" + token, `""`} {
		_, err := config.Parse("h.yaml", []byte(sync(bad)), envMap(nil), kinds)
		if err == nil {
			t.Errorf("heartbeat_url %s: want a problem", bad)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, token) || !strings.Contains(msg, "h.yaml:3: syncs[0].heartbeat_url: must be a URL starting with http:// or https://") {
			t.Errorf("heartbeat_url %s: problem %q", bad, msg)
		}
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	known := []string{"api_key", "base_url", "list_ids", "page_size", "type", "url"}
	tests := []struct{ key, want string }{
		{"pagesize", "page_size"},
		{"PageSize", "page_size"},
		{"page-size", "page_size"},
		{"pag_size", "page_size"},
		{"apikey", "api_key"},
		{"baseurl", "base_url"},
		{"lsit_ids", "list_ids"},
		{"typ", "type"},
		{"uri", "url"},
		{"colour", ""},
		{"x", ""},
		{strings.Repeat("a", 200), ""},
	}
	for _, tt := range tests {
		if got := config.Suggest(tt.key, known); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

// TestSourceReadJSON: what a source reads changes with its table, query or
// cursor column and its identity, not with the page size, the record limit
// or the lookback, and it holds no password.
func TestSourceReadJSON(t *testing.T) {
	t.Parallel()
	read := func(t *testing.T, source string) string {
		t.Helper()
		yaml := `syncs: [{id: s1, source: {type: postgres, dsn: "postgres://reader:pg-s3cret@db:5432/crm", ` + source +
			`}, mapping: {fields: {e: email}}, destination: {type: webhook, url: "https://example.com/h"}}]`
		cfg, err := config.Parse("r.yaml", []byte(yaml), envMap(nil), kinds)
		if err != nil {
			t.Fatal(err)
		}
		j, err := cfg.Syncs[0].SourceReadJSON()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(j, "pg-s3cret") {
			t.Fatalf("the source's read shows the password: %s", j)
		}
		return j
	}
	base := read(t, `table: contacts, cursor_column: updated_at, identity: id`)
	for _, same := range []string{
		`table: contacts, cursor_column: updated_at, identity: id, page_size: 50, max_record_bytes: 4096, cursor_lookback: 1h`,
		`identity: id, cursor_column: updated_at, table: contacts`,
	} {
		if got := read(t, same); got != base {
			t.Errorf("%s: %s, want %s", same, got, base)
		}
	}
	for _, other := range []string{
		`table: people, cursor_column: updated_at, identity: id`,
		`table: contacts, cursor_column: created_at, identity: id`,
		`table: contacts, cursor_column: updated_at, identity: uuid`,
		`query: "select * from contacts", cursor_column: updated_at, identity: id`,
	} {
		if got := read(t, other); got == base {
			t.Errorf("%s reads the same as the base: %s", other, got)
		}
	}
}

// TestURLQueryCredentials: webhook and function URLs carry their keys in
// query parameters of other names than password or token (Azure SAS's
// sig, Azure Functions' code); the stored definition hides them too, and
// they are secrets for scrubbing. Settings stay.
func TestURLQueryCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"https://acct.blob.core.windows.net/c?sv=2022-11-02&sig=s3cretSAS", "https://acct.blob.core.windows.net/c?sig=xxxxx&sv=2022-11-02"},
		{"https://fn.azurewebsites.net/api/hook?code=s3cretFN", "https://fn.azurewebsites.net/api/hook?code=xxxxx"},
		{"https://h.example.com/in?X-Signature=s3cretX&page=2", "https://h.example.com/in?X-Signature=xxxxx&page=2"},
		{"https://h.example.com/in?page=2", "https://h.example.com/in?page=2"},
	} {
		if got := config.RedactURL(c.in); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		secrets := config.URLSecrets(c.in)
		if strings.Contains(c.in, "s3cret") && (len(secrets) != 1 || !strings.HasPrefix(secrets[0], "s3cret")) {
			t.Errorf("URLSecrets(%q) = %q", c.in, secrets)
		}
	}
}

// TestEnvValuesNamedInEveryProblem: the fields whose problems quoted what
// they got (redis_namespace, max_removals, a file source's path) name the
// variable when the value came from the environment.
func TestEnvValuesNamedInEveryProblem(t *testing.T) {
	t.Parallel()
	const envValue = "EnvSecret Kk11"
	path := filepath.Join(t.TempDir(), "s.yaml")
	yaml := `store: sqlite://./o.db
redis_namespace: "${S}"
settings: {max_removals: "${S}"}
syncs:
  - id: a
    max_removals: "${S}"
    source: {type: csv, path: "/nowhere/${S}.csv"}
    destination: {type: webhook, url: "https://hooks.example.com/x"}
    mapping: {email: e}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Validate(path, envMap(map[string]string{"S": envValue}), kinds)
	if err == nil {
		t.Fatal("want problems")
	}
	msg := err.Error()
	if strings.Contains(msg, "Kk11") {
		t.Errorf("a value from the environment is shown:\n%s", msg)
	}
	for _, want := range []string{"redis_namespace:", "settings.max_removals:", "syncs[0].max_removals:", "syncs[0].source.path: the path in ${S} does not exist"} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
}
