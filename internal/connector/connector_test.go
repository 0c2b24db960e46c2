package connector_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
)

// TestDefault: the product's destinations, each found by its type, each
// declaring its keys consistently (secret keys are keys it owns; no key of
// its own shadows a key every destination has).
func TestDefault(t *testing.T) {
	reg := connector.Default()
	var types []string
	for _, d := range reg.Destinations() {
		types = append(types, d.Type())
		if got, ok := reg.Lookup(d.Type()); !ok || got.Type() != d.Type() {
			t.Errorf("Lookup(%q) = %v, %v", d.Type(), got, ok)
		}
		for _, k := range d.SecretKeys() {
			if !slices.Contains(d.DestinationKeys(), k) {
				t.Errorf("%s: secret key %q is not one of its keys %v", d.Type(), k, d.DestinationKeys())
			}
		}
		for _, k := range d.DestinationKeys() {
			if slices.Contains([]string{"type", "mode", "concurrency", "timeout", "rate_limit"}, k) {
				t.Errorf("%s: key %q is every destination's, not its own", d.Type(), k)
			}
		}
		if d.NewSpec() == nil {
			t.Errorf("%s: NewSpec is nil", d.Type())
		}
	}
	if !slices.Equal(types, []string{"brevo", "webhook", "hubspot", "klaviyo"}) {
		t.Fatalf("Default registers %v, want brevo, webhook, hubspot and klaviyo", types)
	}
	if k := reg.Kinds(); len(k.Destinations) != 4 {
		t.Fatalf("Kinds holds %d destinations", len(k.Destinations))
	}
	if _, ok := reg.Lookup("example"); ok {
		t.Fatal("Lookup found an unregistered type")
	}
	if _, ok := connector.New().Lookup("brevo"); ok {
		t.Fatal("an empty registry found brevo")
	}
	var sources []string
	for _, s := range reg.Sources() {
		sources = append(sources, s.Type())
		if got, ok := reg.LookupSource(s.Type()); !ok || got.Type() != s.Type() {
			t.Errorf("LookupSource(%q) = %v, %v", s.Type(), got, ok)
		}
		for _, k := range s.SecretKeys() {
			if !slices.Contains(s.SourceKeys(), k) {
				t.Errorf("%s: secret key %q is not one of its keys", s.Type(), k)
			}
		}
	}
	if !slices.Equal(sources, []string{"csv", "jsonl", "postgres", "mysql", "parquet", "shopify"}) {
		t.Fatalf("Default registers sources %v", sources)
	}
	more := reg.WithDestinations(connector.Default().Destinations()[0])
	if len(more.Destinations()) != 5 || len(more.Sources()) != 6 || len(reg.Destinations()) != 4 {
		t.Fatal("WithDestinations must add to a copy")
	}
}

// TestDestinationPayload: the settings that shape every record beyond its
// mapped values, per kind, canonical, and only where they are written
// (docs/guide.md#changing-a-sync).
func TestDestinationPayload(t *testing.T) {
	reg := connector.Default()
	for _, tc := range []struct{ dest, want string }{
		{`{type: brevo, api_key: k, list_ids: [7, 2, 7]}`, "list_ids=2,7;empty=erase"},
		{`{type: brevo, api_key: k, mode: single}`, "empty=erase"},
		{`{type: hubspot, token: t}`, "null=clear"},
		{`{type: klaviyo, api_key: k, list_id: Ab1}`, "list_id=Ab1"},
		{`{type: klaviyo, api_key: k, list_id: Ab1, write_mode: mirror}`, "list_id=Ab1"},
		{`{type: klaviyo, api_key: k, list_id: Ab1, mode: single}`, ""},
		{`{type: klaviyo, api_key: k, list_id: Ab1, write_mode: update}`, ""},
		{`{type: webhook, url: "https://example.com/hook"}`, ""},
	} {
		yaml := `store: sqlite://./x.db
syncs:
  - id: s
    schedule: "@every 1h"
    source: {type: csv, path: x.csv, identity: id}
    destination: ` + tc.dest + `
    mapping: {email: email}
`
		if strings.Contains(tc.dest, "webhook") {
			yaml = strings.Replace(yaml, "mapping: {email: email}", "mapping: {fields: {id: id}}", 1)
		}
		cfg, err := config.Parse("x.yaml", []byte(yaml), func(string) (string, bool) { return "", false }, reg.Kinds())
		if err != nil {
			t.Fatalf("%s: %v", tc.dest, err)
		}
		if got := config.DestinationPayload(cfg.Syncs[0].Destination); got != tc.want {
			t.Errorf("%s: DestinationPayload = %q, want %q", tc.dest, got, tc.want)
		}
	}
}

// TestDestinationAddress: another API key, token, base_url, url or type is
// another address (the records may go to another account); the same
// destination written otherwise (a default spelt out, a trailing slash, the
// webhook's secret) is the same; neither the credential nor the endpoint
// (a webhook's URL may hold a token) appears in it
// (docs/guide.md#changing-a-sync).
func TestDestinationAddress(t *testing.T) {
	reg := connector.Default()
	address := func(dest string) string {
		t.Helper()
		mapping := "{email: email}"
		if strings.Contains(dest, "webhook") {
			mapping = "{fields: {id: id}}"
		}
		yaml := "store: sqlite://./x.db\nsyncs:\n  - id: s\n    source: {type: csv, path: x.csv, identity: id}\n" +
			"    destination: " + dest + "\n    mapping: " + mapping + "\n"
		cfg, err := config.Parse("x.yaml", []byte(yaml), func(string) (string, bool) { return "", false }, reg.Kinds())
		if err != nil {
			t.Fatalf("%s: %v", dest, err)
		}
		a := config.DestinationAddress(cfg.Syncs[0].Destination)
		for _, secret := range []string{"xkeysib-first", "xkeysib-second", "pat-na1-secret", "example.com", "127.0.0.1"} {
			if strings.Contains(a, secret) {
				t.Fatalf("%s: address %q holds the credential", dest, a)
			}
		}
		return a
	}
	same := [][2]string{
		{`{type: brevo, api_key: xkeysib-first, list_ids: [2]}`, `{type: brevo, api_key: xkeysib-first, list_ids: [2, 7], base_url: "https://api.brevo.com/v3/"}`},
		{`{type: webhook, url: "https://example.com/hook"}`, `{type: webhook, url: "https://example.com/hook", secret: s2}`},
	}
	other := [][2]string{
		{`{type: brevo, api_key: xkeysib-first, list_ids: [2]}`, `{type: brevo, api_key: xkeysib-second, list_ids: [2]}`},
		{`{type: brevo, api_key: xkeysib-first, list_ids: [2]}`, `{type: brevo, api_key: xkeysib-first, list_ids: [2], base_url: "http://127.0.0.1:8026/v3"}`},
		{`{type: hubspot, token: pat-na1-secret}`, `{type: hubspot, token: pat-na1-other}`},
		{`{type: klaviyo, api_key: pk_1, list_id: Ab1}`, `{type: klaviyo, api_key: pk_2, list_id: Ab1}`},
		{`{type: webhook, url: "https://example.com/hook"}`, `{type: webhook, url: "https://example.com/other"}`},
		{`{type: brevo, api_key: xkeysib-first, list_ids: [2]}`, `{type: klaviyo, api_key: xkeysib-first, list_id: Ab1}`},
	}
	for _, p := range same {
		if a, b := address(p[0]), address(p[1]); a != b {
			t.Errorf("%s and %s: addresses %q and %q, want one", p[0], p[1], a, b)
		}
	}
	for _, p := range other {
		if a, b := address(p[0]), address(p[1]); a == b {
			t.Errorf("%s and %s: both address %q, want two", p[0], p[1], a)
		}
	}
}

// TestDestinationAccount: destination.account is read on every kind, shown
// in the definition (it is a name, not a secret), and refused empty or too
// long.
func TestDestinationAccount(t *testing.T) {
	reg := connector.Default()
	parse := func(account string) (*config.Config, error) {
		yaml := "store: sqlite://./x.db\nsyncs:\n  - id: s\n    source: {type: csv, path: x.csv, identity: id}\n" +
			"    destination: {type: brevo, api_key: xkeysib-first, list_ids: [2], account: " + account + "}\n    mapping: {email: email}\n"
		return config.Parse("x.yaml", []byte(yaml), func(string) (string, bool) { return "", false }, reg.Kinds())
	}
	cfg, err := parse("acme-production")
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Syncs[0]
	if s.Destination.Account != "acme-production" {
		t.Fatalf("account = %q", s.Destination.Account)
	}
	def, err := s.DefinitionJSON()
	if err != nil || !strings.Contains(def, `"account":"acme-production"`) || strings.Contains(def, "xkeysib-first") {
		t.Fatalf("definition %s, %v: want the account's name and no key", def, err)
	}
	for _, bad := range []string{`""`, strings.Repeat("a", 129)} {
		if _, err := parse(bad); err == nil || !strings.Contains(err.Error(), "destination.account") {
			t.Errorf("account %s: %v; want a problem at destination.account", bad, err)
		}
	}
}
