package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

// TestParseSyncLeavesOutAnotherSyncsUnsetVariables: a command that acts on
// one sync (ParseSync) is not stopped by another sync's unset ${VAR}, nor by
// that sync's other problems, which its empty values may cause; Parse (serve,
// worker, validate) still reports them all, and so does ParseSync for the
// sync itself. A problem outside that sync (the top level, a sync whose
// variables are set, an id) stops every command as before.
func TestParseSyncLeavesOutAnotherSyncsUnsetVariables(t *testing.T) {
	t.Parallel()
	const file = `syncs:
  - id: crm
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: "https://hooks.example.com/${HOOK_PATH:-crm}"}
    mapping: {fields: {email: email}}
  - id: brevo
    source: {type: csv, path: b.csv, page_size: "${PAGE_SIZE}"}
    destination: {type: brevo, api_key: ${BREVO_API_KEY}, mode: single, list_idss: [2]}
    mapping: {email: email}
`
	brevo := []string{
		"c.yaml:7: syncs[1].source.page_size: environment variable PAGE_SIZE is not set",
		"c.yaml:8: syncs[1].destination.api_key: environment variable BREVO_API_KEY is not set",
		`c.yaml:8: syncs[1].destination.list_idss: unknown key "list_idss" (did you mean "list_ids"?)`,
	}
	_, err := config.Parse("c.yaml", []byte(file), envMap(nil), kinds)
	if got := problemsOf(t, err); strings.Join(got, "\n") != strings.Join(brevo, "\n") {
		t.Fatalf("Parse: problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(brevo, "\n"))
	}
	cfg, err := config.ParseSync("c.yaml", []byte(file), envMap(nil), kinds, "crm")
	if err != nil {
		t.Fatalf("ParseSync crm: %v", err)
	}
	if sc, ok := cfg.Sync("crm"); !ok || sc.Destination.Type != "webhook" || len(cfg.Syncs) != 2 {
		t.Fatalf("ParseSync crm: syncs %+v", cfg.Syncs)
	}
	_, err = config.ParseSync("c.yaml", []byte(file), envMap(nil), kinds, "brevo")
	if got := problemsOf(t, err); strings.Join(got, "\n") != strings.Join(brevo, "\n") {
		t.Fatalf("ParseSync brevo: problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(brevo, "\n"))
	}
	for _, tc := range []struct{ name, file, want string }{
		{"a top-level variable", "alerts: {webhook: {url: https://a.example.com, secret: ${WEBHOOK_SECRET}}}\n" + file,
			"c.yaml:1: alerts.webhook.secret: environment variable WEBHOOK_SECRET is not set"},
		{"another sync's problem without an unset variable", strings.Replace(file, "${PAGE_SIZE}", "0", 1) + `  - id: hook
    source: {type: csv, path: c.csv, pagesize: 10}
    destination: {type: webhook, url: https://b.example.com}
    mapping: {fields: {email: email}}
`, `c.yaml:11: syncs[2].source.pagesize: unknown key "pagesize" (did you mean "page_size"?)`},
		{"an unset id", strings.Replace(file, "id: brevo", "id: ${SYNC_ID}", 1),
			"c.yaml:6: syncs[1].id: environment variable SYNC_ID is not set"},
	} {
		_, err := config.ParseSync("c.yaml", []byte(tc.file), envMap(nil), kinds, "crm")
		if got := problemsOf(t, err); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: ParseSync crm: problems %q, want only %q", tc.name, got, tc.want)
		}
	}
}

// TestSoundTopLevel: ParseSync's problems give the config as read when
// every problem lies in the sync's own entry (so a run can record that it
// could not run), and not when one lies at the top level or in another
// sync.
func TestSoundTopLevel(t *testing.T) {
	t.Parallel()
	const file = `store: sqlite://./o.db
syncs:
  - id: crm
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: "https://hooks.example.com/x", headers: {Authorization: "Bearer ${TOKEN}"}}
    mapping: {fields: {email: email}}
`
	for _, tc := range []struct {
		name, file, sync string
		sound            bool
	}{
		{"the sync's own variable", file, "crm", true},
		{"a top-level variable too", "alerts: {webhook: {url: https://a.example.com, secret: ${WEBHOOK_SECRET}}}\n" + file, "crm", false},
		{"another sync's problem", file + `  - id: hook
    source: {type: csv, path: c.csv, pagesize: 10}
    destination: {type: webhook, url: https://b.example.com}
    mapping: {fields: {email: email}}
`, "crm", false},
	} {
		_, err := config.ParseSync("c.yaml", []byte(tc.file), envMap(nil), kinds, tc.sync)
		var probs *config.Problems
		if !errors.As(err, &probs) {
			t.Fatalf("%s: %v, want problems", tc.name, err)
		}
		cfg, ok := probs.SoundTopLevel()
		if ok != tc.sound {
			t.Errorf("%s: SoundTopLevel = %v, want %v", tc.name, ok, tc.sound)
			continue
		}
		if ok && (cfg.Store != "sqlite://./o.db" || len(cfg.Syncs) != 1 || cfg.Syncs[0].ID != "crm") {
			t.Errorf("%s: the config as read: store %q, syncs %+v", tc.name, cfg.Store, cfg.Syncs)
		}
	}
}
