package config_test

import (
	"errors"
	"fmt"
	"github.com/oncesync/oncesync/internal/config"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/failure"
)

// envMap returns an env lookup over m.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// baseEnv holds the variables the table's configs reference.
var baseEnv = map[string]string{"KEY": "xkeysib-table-secret"}

// problemsOf returns the formatted problems of err, failing if err is not a
// *Problems.
func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	var ps *config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want *Problems, got %T: %v", err, err)
	}
	out := make([]string, len(ps.List))
	for i, p := range ps.List {
		out[i] = p.String()
	}
	return out
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		env  map[string]string // nil: baseEnv
		want []string
	}{
		{
			name: "unknown key suggests the closest",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv, pagesize: 10}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{`oncesync.yaml:3: syncs[0].source.pagesize: unknown key "pagesize" (did you mean "page_size"?)`},
		},
		{
			name: "camel case key suggests snake case",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, apiKey: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{
				`oncesync.yaml:4: syncs[0].destination.api_key: is required for brevo destinations`,
				`oncesync.yaml:4: syncs[0].destination.apiKey: unknown key "apiKey" (did you mean "api_key"?)`,
			},
		},
		{
			name: "unknown key far from any lists the valid ones",
			yaml: `frobnicate: 1
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{`oncesync.yaml:1: frobnicate: unknown key "frobnicate" (valid keys: alerts, allow_evicting_redis, redis, redis_namespace, settings, store, syncs, web)`},
		},
		{
			name: "page size zero",
			yaml: `syncs:
  - id: s1
    source:
      type: csv
      path: a.csv
      page_size: 0
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{`oncesync.yaml:6: syncs[0].source.page_size: must be between 1 and 10000, got 0`},
		},
		{
			name: "page size too big and not a number",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv, page_size: 10001}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
  - id: s2
    source: {type: csv, path: a.csv, page_size: lots}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{
				`oncesync.yaml:3: syncs[0].source.page_size: must be between 1 and 10000, got 10001`,
				`oncesync.yaml:7: syncs[1].source.page_size: must be an integer, got "lots"`,
			},
		},
		{
			name: "missing source, destination and mapping",
			yaml: `syncs:
  - id: s1
`,
			want: []string{
				`oncesync.yaml:2: syncs[0].destination: is required (a mapping with type: brevo, webhook, hubspot or klaviyo)`,
				`oncesync.yaml:2: syncs[0].source: is required (a mapping with type: csv, jsonl, postgres, mysql, parquet or shopify)`,
			},
		},
		{
			name: "missing id and mapping.email for brevo",
			yaml: `syncs:
  - source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
`,
			want: []string{
				`oncesync.yaml:2: syncs[0].id: is required`,
				`oncesync.yaml:2: syncs[0].mapping.email: is required for brevo destinations (the column holding the e-mail address)`,
			},
		},
		{
			name: "unset secret variable names the variable and the field",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: "${BREVO_API_KEY}", list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{`oncesync.yaml:4: syncs[0].destination.api_key: environment variable BREVO_API_KEY is not set`},
		},
		{
			name: "secret variable set but empty",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			env:  map[string]string{"KEY": ""},
			want: []string{`oncesync.yaml:4: syncs[0].destination.api_key: is required for brevo destinations (environment variable KEY is set but empty)`},
		},
		{
			// Brevo answers an SMTP key's every API call 401 "Key not
			// found", which reads as a revoked key; the problem names
			// the key's kind, never the key.
			name: "a Brevo SMTP key",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			env:  map[string]string{"KEY": "xsmtpsib-0123456789abcdef-SECRETPART"},
			want: []string{`oncesync.yaml:4: syncs[0].destination.api_key: is a Brevo SMTP key (xsmtpsib-...), which the API refuses: create an API key under SMTP & API > API Keys (it starts with xkeysib-)`},
		},
		{
			name: "unterminated and invalid references",
			yaml: `store: sqlite://${DIR
redis: redis://${1X}/0
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{
				`oncesync.yaml:1: store: unterminated "${" (write "$${" for a literal "${")`,
				`oncesync.yaml:2: redis: invalid environment variable name "1X" in "${1X}" (use letters, digits and _)`,
			},
		},
		{
			name: "unknown source and destination types list the valid ones",
			yaml: `syncs:
  - id: s1
    source: {type: xlsx, path: a.xlsx}
    destination: {type: fax}
`,
			want: []string{
				`oncesync.yaml:3: syncs[0].source.type: unknown source type "xlsx" (valid: csv, jsonl, postgres, mysql, parquet, shopify)`,
				`oncesync.yaml:4: syncs[0].destination.type: unknown destination type "fax" (valid: brevo, webhook, hubspot, klaviyo)`,
			},
		},
		{
			name: "missing types",
			yaml: `syncs:
  - id: s1
    source: {path: a.csv}
    destination: {api_key: ${KEY}}
`,
			want: []string{
				`oncesync.yaml:3: syncs[0].source.type: is required (one of csv, jsonl, postgres, mysql, parquet, shopify)`,
				`oncesync.yaml:4: syncs[0].destination.type: is required (one of brevo, webhook, hubspot, klaviyo)`,
			},
		},
		{
			name: "bad cron",
			yaml: `syncs:
  - id: s1
    schedule: "*/15 * * *"
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
  - id: s2
    schedule: "@hourlyy"
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{
				`oncesync.yaml:3: syncs[0].schedule: invalid cron expression "*/15 * * *": expected exactly 5 fields, found 4: [*/15 * * *] (use 5 fields like "*/15 * * * *" or a descriptor like @hourly)`,
				`oncesync.yaml:8: syncs[1].schedule: invalid cron expression "@hourlyy": unrecognized descriptor: @hourlyy (use 5 fields like "*/15 * * * *" or a descriptor like @hourly)`,
			},
		},
		{
			name: "bad durations",
			yaml: `settings:
  lease_ttl: 30
  deadman_window: 7d
  ledger_retention: -1h
syncs:
  - id: s1
    deadman_window: 0s
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1], timeout: soon}
    mapping: {email: email}
`,
			want: []string{
				`oncesync.yaml:2: settings.lease_ttl: must be a duration like 30s, 10m, 24h or 168h, got "30"`,
				`oncesync.yaml:3: settings.deadman_window: must be a duration like 30s, 10m, 24h or 168h, got "7d"`,
				`oncesync.yaml:4: settings.ledger_retention: must be positive, got -1h0m0s`,
				`oncesync.yaml:7: syncs[0].deadman_window: must be positive, got 0s`,
				`oncesync.yaml:9: syncs[0].destination.timeout: must be a duration like 30s, 10m, 24h or 168h, got "soon"`,
			},
		},
		{
			name: "lease renew not shorter than ttl",
			yaml: `settings:
  lease_ttl: 10s
  lease_renew: 10s
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{`oncesync.yaml:3: settings.lease_renew: lease_renew (10s) must be shorter than lease_ttl (10s)`},
		},
		{
			name: "lease ttl below the default renew",
			yaml: `settings: {lease_ttl: 5s}
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{`oncesync.yaml:1: settings.lease_ttl: lease_renew (10s) must be shorter than lease_ttl (5s)`},
		},
		{
			name: "duplicate sync ids",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
  - id: s1
    source: {type: csv, path: b.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1]}
    mapping: {email: email}
`,
			want: []string{`oncesync.yaml:6: syncs[1].id: duplicate sync id "s1" (already used by syncs[0] at line 2)`},
		},
		{
			name: "file sources without path",
			yaml: `syncs:
  - id: s1
    source: {type: csv}
    destination: {type: webhook, url: https://example.com/h}
  - id: s2
    source: {type: jsonl, path: ""}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{
				`oncesync.yaml:3: syncs[0].source.path: is required for csv sources`,
				`oncesync.yaml:6: syncs[1].source.path: is required for jsonl sources`,
			},
		},
		{
			name: "postgres without dsn, without query or table, with both",
			yaml: `syncs:
  - id: s1
    source: {type: postgres, table: contacts, identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s2
    source: {type: postgres, dsn: "host=db dbname=crm", identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s3
    source: {type: postgres, dsn: "postgres://db/crm", query: select 1, table: t, identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s4
    source: {type: postgres, dsn: "mysql://db/crm", table: "t; drop table x", cursor_column: "a b", path: x.csv}
    destination: {type: webhook, url: https://example.com/h}
  - id: s5
    source: {type: postgres, dsn: "postgres://db/crm", table: t, cursor_lookback: -1m, identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s6
    source: {type: postgres, dsn: "postgres://db/crm", table: t, cursor_lookback: soon, identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s7
    source: {type: postgres, dsn: "postgres://db/crm", table: t, cursor_lookback_values: -5, identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s8
    source: {type: mysql, dsn: "mysql://db/crm", table: t, cursor_lookback_values: many, identity: id}
    destination: {type: webhook, url: https://example.com/h}
  - id: s9
    source: {type: mysql, dsn: "mysql://db/crm", table: t}
    destination: {type: webhook, url: https://example.com/h}
  - id: s10
    source: {type: postgres, dsn: "postgres://db/crm", query: select email from people}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{
				`oncesync.yaml:3: syncs[0].source.dsn: is required for postgres sources`,
				`oncesync.yaml:6: syncs[1].source.query: postgres sources need a query or a table`,
				`oncesync.yaml:9: syncs[2].source.table: set query or table, not both`,
				`oncesync.yaml:12: syncs[3].source.dsn: must be a URL starting with postgres:// or postgresql://, got mysql://`,
				`oncesync.yaml:12: syncs[3].source.table: must be a table name like contacts or crm.contacts, got "t; drop table x"`,
				`oncesync.yaml:12: syncs[3].source.cursor_column: must be a column name (letters, digits, _), got "a b"`,
				`oncesync.yaml:12: syncs[3].source.path: is not used by postgres sources (csv, jsonl and parquet only)`,
				`oncesync.yaml:15: syncs[4].source.cursor_lookback: must be 0 (off) or a duration like 5m, got -1m0s`,
				`oncesync.yaml:18: syncs[5].source.cursor_lookback: must be a duration like 30s, 10m, 24h or 168h, got "soon"`,
				`oncesync.yaml:21: syncs[6].source.cursor_lookback_values: must be 0 (off) or a number of values like 1000, got -5`,
				`oncesync.yaml:24: syncs[7].source.cursor_lookback_values: must be an integer, got "many"`,
				`oncesync.yaml:27: syncs[8].source.cursor_column: set cursor_column (a column every write stamps, such as updated_at) or source.identity: a mysql source reads its rows in pages, in the order of one of them`,
				`oncesync.yaml:30: syncs[9].source.cursor_column: set cursor_column (a column every write stamps, such as updated_at) or source.identity: a postgres source reads its rows in pages, in the order of one of them`,
			},
		},
		{
			name: "file source with postgres keys",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv, table: t}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{`oncesync.yaml:3: syncs[0].source.table: is not used by csv sources (postgres and mysql only)`},
		},
		{
			name: "webhook without url and with brevo keys",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination:
      type: webhook
      list_ids: [1]
    mapping: {email: email}
`,
			want: []string{
				`oncesync.yaml:4: syncs[0].destination.url: is required for webhook destinations`,
				`oncesync.yaml:6: syncs[0].destination.list_ids: is not used by webhook destinations (brevo only)`,
				`oncesync.yaml:7: syncs[0].mapping.email: is not used by webhook destinations (brevo, hubspot and klaviyo only; webhook uses fields)`,
			},
		},
		{
			name: "brevo list ids",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination:
      type: brevo
      api_key: ${KEY}
      list_ids: [3, 0, -2, x]
    mapping: {email: email}
  - id: s2
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}}
    mapping: {email: email}
`,
			want: []string{
				`oncesync.yaml:7: syncs[0].destination.list_ids[1]: must be a positive Brevo list id, got 0`,
				`oncesync.yaml:7: syncs[0].destination.list_ids[2]: must be a positive Brevo list id, got -2`,
				`oncesync.yaml:7: syncs[0].destination.list_ids[3]: must be an integer, got "x"`,
				`oncesync.yaml:11: syncs[1].destination.list_ids: is required in bulk mode: Brevo's contact import needs at least one list id`,
			},
		},
		{
			name: "partitions out of range",
			yaml: `syncs:
  - id: s1
    partitions: 0
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
  - id: s2
    partitions: 65
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{
				`oncesync.yaml:3: syncs[0].partitions: must be between 1 and 64, got 0`,
				`oncesync.yaml:7: syncs[1].partitions: must be between 1 and 64, got 65`,
			},
		},
		{
			name: "partitioned sync needs identity and redis",
			yaml: `syncs:
  - id: s1
    partitions: 4
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
  - id: s2
    partitions: 2
    source: {type: csv, path: a.csv, identity: id}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{
				`oncesync.yaml:3: syncs[0].partitions: partitions: 4 needs source.identity: rows are split between the partitions by a stable hash of the identity column`,
				`oncesync.yaml:7: syncs[1].partitions: partitions: 2 needs redis: the partitions check the run's source snapshot in a checkpoint barrier kept in Redis`,
			},
		},
		{
			name: "store and redis urls",
			yaml: `store: mysql://user:hunter2@db/x
redis: http://:hunter2@cache:6379
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{
				`oncesync.yaml:1: store: must be a sqlite:// or postgres:// URL (e.g. sqlite://./oncesync.db), got mysql://`,
				`oncesync.yaml:2: redis: must be a URL starting with redis:// or rediss://, got http://`,
			},
		},
		{
			name: "store without a file, postgres store without host",
			yaml: `store: "sqlite://"
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{`oncesync.yaml:1: store: must name a database file after sqlite:// (e.g. sqlite://./oncesync.db)`},
		},
		{
			name: "invalid base_url and url",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1], base_url: "ftp://api.brevo.com/v3"}
    mapping: {email: email}
  - id: s2
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: "https:///nohost"}
  - id: s3
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: "example.com/hook"}
`,
			want: []string{
				`oncesync.yaml:4: syncs[0].destination.base_url: must be a URL starting with http:// or https://, got ftp://`,
				`oncesync.yaml:8: syncs[1].destination.url: must be a URL starting with http:// or https:// with a host`,
				`oncesync.yaml:11: syncs[2].destination.url: must be a URL starting with http:// or https://`,
			},
		},
		{
			name: "destination knobs",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1], mode: batch, concurrency: 0, rate_limit: -1}
    mapping: {email: email, attributes: {FIRSTNAME: ""}, fields: {a: b}}
`,
			want: []string{
				`oncesync.yaml:4: syncs[0].destination.mode: unknown mode "batch" (valid: single, bulk)`,
				`oncesync.yaml:4: syncs[0].destination.concurrency: must be between 1 and 256, got 0`,
				`oncesync.yaml:4: syncs[0].destination.rate_limit: must be 0 (unlimited) or more requests per second, got -1`,
				`oncesync.yaml:5: syncs[0].mapping.attributes.FIRSTNAME: needs a source column name`,
				`oncesync.yaml:5: syncs[0].mapping.fields: is not used by brevo destinations (webhook only; brevo uses email, ext_id and attributes)`,
			},
		},
		{
			name: "ext_id mapped twice",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: ${KEY}, list_ids: [1], mode: bulk}
    mapping: {email: email, ext_id: id, attributes: {ext_id: crm_id, FIRSTNAME: first}}
`,
			want: []string{
				`oncesync.yaml:5: syncs[0].mapping.attributes.ext_id: maps Brevo's EXT_ID, which mapping.ext_id already writes; keep one of them`,
			},
		},
		{
			name: "webhook headers",
			yaml: `syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination:
      type: webhook
      url: https://example.com/h
      headers:
        idempotency-key: mine
        "X Bad": y
        X-Token: ${KEY}
`,
			want: []string{
				`oncesync.yaml:8: syncs[0].destination.headers.idempotency-key: is set by oncesync and cannot be overridden`,
				`oncesync.yaml:9: syncs[0].destination.headers["X Bad"]: is not a valid HTTP header name`,
			},
		},
		{
			name: "yaml syntax error on the right line",
			yaml: `store: sqlite://a.db
syncs:
  - id: s1
    source: {type: csv, path: a.csv
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{`oncesync.yaml:4: invalid YAML: did not find expected ',' or '}'`},
		},
		{
			name: "yaml scanner error",
			yaml: "store: sqlite://a.db\nsyncs: @x\n",
			want: []string{`oncesync.yaml:2: invalid YAML: found character that cannot start any token`},
		},
		{
			name: "unknown anchor",
			yaml: "store: sqlite://a.db\nsyncs: *nope\n",
			want: []string{`oncesync.yaml:2: invalid YAML: unknown anchor 'nope' referenced`},
		},
		{
			name: "empty file",
			yaml: "# nothing\n",
			want: []string{`oncesync.yaml:1: the file is empty`},
		},
		{
			name: "top level is a list",
			yaml: "- a\n- b\n",
			want: []string{`oncesync.yaml:1: the top level must be a mapping of keys (store, settings, syncs, ...), got a list`},
		},
		{
			name: "two documents",
			yaml: "store: sqlite://a.db\n---\nstore: sqlite://b.db\n",
			want: []string{`oncesync.yaml:2: the file holds more than one YAML document; put everything in one`},
		},
		{
			name: "no syncs",
			yaml: "store: sqlite://a.db\n",
			want: []string{`oncesync.yaml:1: syncs: at least one sync is required`},
		},
		{
			name: "duplicate key",
			yaml: `store: sqlite://a.db
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
    id: s2
`,
			want: []string{`oncesync.yaml:6: syncs[0].id: duplicate key "id" (first set at line 3)`},
		},
		{
			name: "wrong shapes",
			yaml: `settings: [1]
allow_evicting_redis: yes
syncs:
  - id: s1
    source: csv
    destination: {type: webhook, url: https://example.com/h, headers: [a]}
    mapping: {fields: {a: [b]}}
  - 3
  -
`,
			want: []string{
				`oncesync.yaml:1: settings: must be a mapping, got a list`,
				`oncesync.yaml:2: allow_evicting_redis: must be true or false, got "yes"`,
				`oncesync.yaml:5: syncs[0].source: must be a mapping, got a single value`,
				`oncesync.yaml:6: syncs[0].destination.headers: must be a mapping, got a list`,
				`oncesync.yaml:7: syncs[0].mapping.fields.a: must be a string, got a list`,
				`oncesync.yaml:8: syncs[1]: must be a mapping, got a single value`,
				`oncesync.yaml:9: syncs[2]: must be a mapping with id, source, destination and mapping, got nothing`,
			},
		},
		{
			name: "ids and settings ranges",
			yaml: `settings: {breaker_failures: 0, in_doubt_grace: 11m}
redis_namespace: "prod:eu"
syncs:
  - id: "bad id!"
    workspace: "-acme"
    breaker_failures: 1001
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{
				`oncesync.yaml:1: settings.breaker_failures: must be between 1 and 1000, got 0`,
				`oncesync.yaml:1: settings.in_doubt_grace: must be between 0s and 10m0s, got 11m0s`,
				`oncesync.yaml:2: redis_namespace: must be 1 to 64 letters, digits, '.', '_' or '-', got "prod:eu"`,
				`oncesync.yaml:4: syncs[0].id: must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got "bad id!"`,
				`oncesync.yaml:5: syncs[0].workspace: must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got "-acme"`,
				`oncesync.yaml:6: syncs[0].breaker_failures: must be between 1 and 1000, got 1001`,
			},
		},
		{
			name: "alerts and web",
			yaml: `alerts:
  webhook: {secret: "whsec_not*base64!"}
  email:
    port: 70000
    from: not-an-address
    to: [ops@example.com, "jane.doe@"]
  sentry: {dsn: "https://sentry.io/1"}
web:
  listen: localhost
  api_tokens: [""]
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
`,
			want: []string{
				`oncesync.yaml:2: alerts.webhook.url: is required`,
				"oncesync.yaml:2: alerts.webhook.secret: has Standard Webhooks' whsec_ prefix but what follows is not base64 (whsec_BASE64): copy the secret as the receiver gives it",
				`oncesync.yaml:3: alerts.email.host: is required`,
				`oncesync.yaml:4: alerts.email.port: must be between 1 and 65535, got 70000`,
				`oncesync.yaml:5: alerts.email.from: is not a valid e-mail address`,
				`oncesync.yaml:6: alerts.email.to[1]: is not a valid e-mail address`,
				`oncesync.yaml:7: alerts.sentry.dsn: is not a valid Sentry DSN (expected https://KEY@HOST/PROJECT)`,
				`oncesync.yaml:9: web.listen: must be HOST:PORT (e.g. 127.0.0.1:8080), got "localhost"`,
				`oncesync.yaml:10: web.api_tokens[0]: is empty`,
			},
		},
		{
			// validate refused none of these until 2026-12-04; every command
			// then failed with store_unavailable, "open the PostgreSQL store".
			name: "a store schema the PostgreSQL store cannot use",
			yaml: `store: "postgres://u:${PW}@db:5432/app?search_path=Bad-Schema"
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
`,
			env: map[string]string{"PW": "pw-secret"},
			want: []string{
				`oncesync.yaml:1: store: search_path names schema "Bad-Schema" for oncesync's tables: want a lower-case identifier of at most 63 characters (letters, digits, _), not pg_*`,
			},
		},
		{
			// Until 2026-12-05 oncesync overrode options' search_path with
			// its own schema, oncesync, without a word: two deployments
			// told apart this way shared their syncs, leases and ledger.
			name: "a store schema in options",
			yaml: `store: "postgres://u:${PW}@db:5432/app?options=-c%20search_path%3Dstaging"
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: https://example.com/h}
`,
			env: map[string]string{"PW": "pw-secret"},
			want: []string{
				`oncesync.yaml:1: store: options sets search_path, which oncesync does not use: its tables are in the schema of ?search_path=NAME (oncesync when absent); remove search_path from options, and name the schema with ?search_path=NAME (an existing deployment's tables are in oncesync, or in the ?search_path= schema)`,
			},
		},
		{
			name: "every problem is reported, not the first",
			yaml: `store: mysql://x
settings:
  lease_renew: 1m
syncs:
  - id: a
    source: {type: csv, page_size: 0}
    destination: {type: brevo, api_key: ${MISSING}}
  - id: a
    schedule: nope
    source: {type: jsonl, path: x.jsonl}
    destination: {type: webhook}
    partitions: 100
`,
			want: []string{
				`oncesync.yaml:1: store: must be a sqlite:// or postgres:// URL (e.g. sqlite://./oncesync.db), got mysql://`,
				`oncesync.yaml:3: settings.lease_renew: lease_renew (1m0s) must be shorter than lease_ttl (30s)`,
				`oncesync.yaml:5: syncs[0].mapping.email: is required for brevo destinations (the column holding the e-mail address)`,
				`oncesync.yaml:6: syncs[0].source.path: is required for csv sources`,
				`oncesync.yaml:6: syncs[0].source.page_size: must be between 1 and 10000, got 0`,
				`oncesync.yaml:7: syncs[0].destination.list_ids: is required in bulk mode: Brevo's contact import needs at least one list id`,
				`oncesync.yaml:7: syncs[0].destination.api_key: environment variable MISSING is not set`,
				`oncesync.yaml:8: syncs[1].id: duplicate sync id "a" (already used by syncs[0] at line 5)`,
				`oncesync.yaml:9: syncs[1].schedule: invalid cron expression "nope": expected exactly 5 fields, found 1: [nope] (use 5 fields like "*/15 * * * *" or a descriptor like @hourly)`,
				`oncesync.yaml:11: syncs[1].destination.url: is required for webhook destinations`,
				`oncesync.yaml:12: syncs[1].partitions: must be between 1 and 64, got 100`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := tt.env
			if env == nil {
				env = baseEnv
			}
			cfg, err := config.Parse("oncesync.yaml", []byte(tt.yaml), envMap(env), kinds)
			if cfg != nil {
				t.Errorf("want no config on problems, got %+v", cfg)
			}
			got := problemsOf(t, err)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if err.Error() != strings.Join(tt.want, "\n") {
				t.Errorf("Error() = %q", err.Error())
			}
			for _, v := range env {
				if v != "" && strings.Contains(err.Error(), v) {
					t.Errorf("error leaks the value of an environment variable: %q", err.Error())
				}
			}
		})
	}
}

func TestProblemsIsInvalidDefinition(t *testing.T) {
	t.Parallel()
	_, err := config.Parse("c.yaml", []byte("store: sqlite://a.db\n"), envMap(nil), kinds)
	if !errors.Is(err, config.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	if got := failure.CodeOf(err); got != failure.InvalidSyncDefinition {
		t.Errorf("failure.CodeOf = %q, want %q", got, failure.InvalidSyncDefinition)
	}
	if p := (config.Problem{File: "f.yaml", Msg: "m"}); p.String() != "f.yaml: m" {
		t.Errorf("Problem without line or field = %q", p.String())
	}
}

// specEnv is the environment testdata/spec.yaml and full.yaml are loaded with.
var specEnv = map[string]string{
	"WEBHOOK_SECRET":        "whsec-s3cret",
	"ONCESYNC_API_TOKEN":    "tok-s3cret-1",
	"ONCESYNC_API_TOKEN_2":  "tok-s3cret-2",
	"BREVO_API_KEY":         "xkeysib-s3cret",
	"KLAVIYO_KEY":           "pk-s3cret",
	"PG_PASSWORD":           "pg-s3cret",
	"REDIS_PASSWORD":        "redis-s3cret",
	"SMTP_PASSWORD":         "smtp-s3cret",
	"SENTRY_DSN":            "https://sentrykey-s3cret@o1.ingest.sentry.io/42",
	"CRM_PASSWORD":          "crm-s3cret",
	"EVENTS_WEBHOOK_SECRET": "evwh-s3cret",
	"EVENTS_TOKEN":          "evtok-s3cret",
	"HC_PING_UUID":          "0f1e2d3c-s3cret-4b5a-9687-a1b2c3d4e5f6",
	"SHOPIFY_TOKEN":         "shpat_s3cret",
	"HUBSPOT_TOKEN":         "pat-na1-s3cret",
	"OIDC_SECRET":           "oidc-s3cret",
}

func TestLoadSpecExample(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("testdata/spec.yaml", envMap(specEnv), kinds)
	if err != nil {
		t.Fatalf("the contract's example config (testdata/spec.yaml) must load: %v", err)
	}
	want := config.Settings{LeaseTTL: 30 * time.Second, LeaseRenew: 10 * time.Second, BreakerFailures: 5, DeadmanWindow: 24 * time.Hour, LedgerRetention: 168 * time.Hour, InDoubtGrace: 10 * time.Second}
	if cfg.Settings != want {
		t.Errorf("settings = %+v, want %+v", cfg.Settings, want)
	}
	if cfg.Path != "testdata/spec.yaml" || cfg.Store != "sqlite://./oncesync.db" || cfg.Redis != "redis://127.0.0.1:6379/0" {
		t.Errorf("path/store/redis = %q %q %q", cfg.Path, cfg.Store, cfg.Redis)
	}
	if cfg.Alerts.Webhook.Secret != "whsec-s3cret" || len(cfg.Web.APITokens) != 1 || cfg.Web.APITokens[0].Token != "tok-s3cret-1" {
		t.Errorf("interpolation: webhook secret %q, tokens %q", cfg.Alerts.Webhook.Secret, cfg.Web.APITokens)
	}
	s, ok := cfg.Sync("contacts-to-brevo")
	if !ok {
		t.Fatal("Sync(contacts-to-brevo) not found")
	}
	if brevoOf(s).APIKey != "xkeysib-s3cret" || s.Destination.Mode != config.ModeBulk || len(brevoOf(s).ListIDs) != 1 || brevoOf(s).ListIDs[0] != 2 {
		t.Errorf("destination = %+v", s.Destination)
	}
	if brevoOf(s).Email != "email" || brevoOf(s).Attributes["FIRSTNAME"] != "first_name" || brevoOf(s).Attributes["LASTNAME"] != "last_name" {
		t.Errorf("mapping = %+v", brevoOf(s))
	}
	if s.Source.Identity != "id" || s.Source.PageSize != 500 || fileOf(s).Path != "contacts.csv" {
		t.Errorf("source = %+v", s.Source)
	}
	if _, ok := cfg.Sync("nope"); ok {
		t.Error("Sync(nope) found")
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	yaml := `syncs:
  - id: minimal
    source: {type: csv, path: a.csv}
    destination: {type: brevo, api_key: k, list_ids: [1]}
    mapping: {email: email}
  - id: hook
    source: {type: jsonl, path: a.jsonl}
    destination: {type: webhook, url: http://127.0.0.1:9/h}
alerts:
  email: {host: smtp, from: a@example.com, to: [b@example.com]}
`
	cfg, err := config.Parse("d.yaml", []byte(yaml), envMap(nil), kinds)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Settings != config.Defaults() {
		t.Errorf("settings = %+v, want Defaults() %+v", cfg.Settings, config.Defaults())
	}
	if cfg.Store != config.DefaultStore || cfg.Redis != "" || cfg.Web.Listen != config.DefaultListen || cfg.AllowEvictingRedis {
		t.Errorf("top-level defaults: %+v", cfg)
	}
	if cfg.Alerts.Email.Port != 587 || !cfg.Alerts.Email.StartTLS {
		t.Errorf("email defaults: %+v", cfg.Alerts.Email)
	}
	b := cfg.Syncs[0]
	if b.Workspace != "default" || b.Partitions != 1 || b.Source.PageSize != 500 || b.Schedule != "" {
		t.Errorf("sync defaults: %+v", b)
	}
	if d := b.Destination; d.Mode != config.ModeBulk || d.Concurrency != 4 || d.Timeout != 30*time.Second || d.RateLimit != 10 || brevoOf(d).BaseURL != "https://api.brevo.com/v3" {
		t.Errorf("brevo defaults: %+v", d)
	}
	if d := cfg.Syncs[1].Destination; d.Mode != config.ModeSingle || d.Concurrency != 4 || d.Timeout != 30*time.Second || d.RateLimit != 0 {
		t.Errorf("webhook defaults: %+v", d)
	}
	if b.LedgerRetention != 0 || b.DeadmanWindow != 0 || b.BreakerFailures != 0 {
		t.Errorf("per-sync overrides must stay 0 (use settings): %+v", b)
	}
	if b.EffectiveLedgerRetention(cfg.Settings) != 168*time.Hour || b.EffectiveDeadmanWindow(cfg.Settings) != 24*time.Hour || b.EffectiveBreakerFailures(cfg.Settings) != 5 {
		t.Error("effective values must fall back to settings")
	}
}

func TestLoadFull(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("testdata/full.yaml", envMap(specEnv), kinds)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != "postgres://oncesync:pg-s3cret@db.internal:5432/oncesync" || cfg.Redis != "rediss://:redis-s3cret@redis.internal:6380/1" || !cfg.AllowEvictingRedis {
		t.Errorf("top level: %q %q %v", cfg.Store, cfg.Redis, cfg.AllowEvictingRedis)
	}
	want := config.Settings{LeaseTTL: 15 * time.Minute, LeaseRenew: 5 * time.Minute, BreakerFailures: 3, DeadmanWindow: 12 * time.Hour, LedgerRetention: 336 * time.Hour, InDoubtGrace: 30 * time.Second, MaxRemovals: config.Removals{Percent: 5, Set: true}}
	if cfg.Settings != want {
		t.Errorf("settings = %+v", cfg.Settings)
	}
	e := cfg.Alerts.Email
	if e.Host != "smtp.example.com" || e.Port != 2525 || e.Username != "oncesync" || e.Password != "smtp-s3cret" || e.StartTLS || len(e.To) != 2 {
		t.Errorf("email = %+v", e)
	}
	if cfg.Alerts.Sentry.DSN != specEnv["SENTRY_DSN"] || cfg.Web.Listen != "0.0.0.0:9090" || len(cfg.Web.APITokens) != 2 {
		t.Errorf("sentry/web = %+v %+v", cfg.Alerts.Sentry, cfg.Web)
	}
	s := cfg.Syncs[0]
	if s.HeartbeatURL != "https://hc-ping.com/"+specEnv["HC_PING_UUID"] {
		t.Errorf("heartbeat_url = %q", s.HeartbeatURL)
	}
	if s.Schedule != "@hourly" || s.Partitions != 4 || !s.AllowRewriteAfterRetention || s.LedgerRetention != 720*time.Hour || s.DeadmanWindow != 48*time.Hour || s.BreakerFailures != 10 {
		t.Errorf("sync[0] = %+v", s)
	}
	if got := s.EffectiveMaxRemovals(cfg.Settings); got.Of(1000) != 200 || s.Destination.EffectiveWriteMode() != config.WriteUpsert {
		t.Errorf("max_removals %v write_mode %q", got, s.Destination.EffectiveWriteMode())
	}
	if s.EffectiveLedgerRetention(cfg.Settings) != 720*time.Hour || s.EffectiveBreakerFailures(cfg.Settings) != 10 || s.EffectiveDeadmanWindow(cfg.Settings) != 48*time.Hour {
		t.Error("effective values must prefer the sync's overrides")
	}
	if src := s.Source; src.Type != "postgres" || pgOf(s).Table != "public.contacts" || pgOf(s).CursorColumn != "updated_at" || src.PageSize != 1000 || pgOf(s).VersionQuery == "" || src.Identity != "id" {
		t.Errorf("source = %+v", src)
	}
	if d := s.Destination; d.Mode != config.ModeSingle || d.Concurrency != 8 || d.Timeout != 10*time.Second || d.RateLimit != 5.5 || len(brevoOf(d).ListIDs) != 2 {
		t.Errorf("destination = %+v", d)
	}
	if brevoOf(s).ExtID != "id" {
		t.Errorf("mapping = %+v", brevoOf(s))
	}
	w := cfg.Syncs[1]
	if w.Workspace != "default" || w.Destination.Mode != config.ModeBulk || webhookOf(w).Headers["Authorization"] != "Bearer evtok-s3cret" || webhookOf(w).Fields["at"] != "occurred_at" {
		t.Errorf("webhook sync = %+v", w)
	}
	// The third sync merges the first one's destination (<<: *brevo) and
	// overrides mode and list_ids.
	n := cfg.Syncs[2].Destination
	if n.Type != "brevo" || brevoOf(n).APIKey != "xkeysib-s3cret" || n.Mode != config.ModeBulk || len(brevoOf(n).ListIDs) != 1 || brevoOf(n).ListIDs[0] != 9 || n.Concurrency != 8 || n.RateLimit != 5.5 {
		t.Errorf("merged destination = %+v", n)
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := config.Load(filepath.Join(dir, "missing.yaml"), envMap(nil), kinds)
	var ps *config.Problems
	if err == nil || errors.As(err, &ps) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: want a wrapped not-exist error, got %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("store: sqlite://a.db\n#"+strings.Repeat("x", config.MaxFileSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(big, envMap(nil), kinds)
	if got := problemsOf(t, err); len(got) != 1 || got[0] != big+": the file is larger than 4 MiB" {
		t.Errorf("big file: %q", got)
	}
}

func TestAliasBomb(t *testing.T) {
	t.Parallel()
	// Every level merges the previous one twice: 2^30 merges if expanded
	// naively.
	var b strings.Builder
	b.WriteString("syncs:\n  - mapping: {attributes: &m0 {A: a}}\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "  - mapping: {attributes: &m%d {<<: [*m%d, *m%d]}}\n", i, i-1, i-1)
	}
	start := time.Now()
	_, err := config.Parse("bomb.yaml", []byte(b.String()), envMap(nil), kinds)
	if err == nil || !strings.Contains(err.Error(), "bomb.yaml: the file expands to too many values (aliases?); simplify it") {
		t.Fatalf("want the expansion problem, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// TestExtensionFields: top-level keys starting with x- are a place for YAML
// anchors the syncs share, as in Compose files; they are not decoded (an
// unset variable in one nobody uses is no problem), while a use of one is
// checked where it is used. Elsewhere an x- key is unknown.
func TestExtensionFields(t *testing.T) {
	t.Parallel()
	const file = `x-brevo: &brevo
  type: webhook
  url: ${HOOK}
x-unused:
  secret: ${NOT_SET}
syncs:
  - id: a
    source: {type: csv, path: a.csv}
    destination: *brevo
  - id: b
    source: {type: csv, path: b.csv}
    destination: {<<: *brevo, url: "https://b.example.com/hook"}
`
	cfg, err := config.Parse("x.yaml", []byte(file), envMap(map[string]string{"HOOK": "https://a.example.com/hook"}), kinds)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(cfg.Syncs) != 2 || cfg.Syncs[0].Destination.Type != "webhook" || cfg.Syncs[1].Destination.Type != "webhook" {
		t.Fatalf("syncs %+v; want two webhook syncs from the x-brevo anchor", cfg.Syncs)
	}
	_, err = config.Parse("x.yaml", []byte(file), envMap(nil), kinds)
	got := strings.Join(problemsOf(t, err), "\n")
	if !strings.Contains(got, "x.yaml:3: syncs[0].destination.url: environment variable HOOK is not set") || strings.Contains(got, "NOT_SET") {
		t.Fatalf("problems %q; want HOOK named where it is used, NOT_SET not at all", got)
	}
	_, err = config.Parse("x.yaml", []byte("syncs:\n  - id: a\n    x-note: 1\n"), envMap(nil), kinds)
	if got := strings.Join(problemsOf(t, err), "\n"); !strings.Contains(got, `unknown key "x-note"`) {
		t.Fatalf("problems %q; want x-note unknown inside a sync", got)
	}
}
