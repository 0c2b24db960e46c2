package config_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/config"
)

// loadWithSource parses a config of one webhook sync whose source is the
// flow mapping source.
func loadWithSource(t *testing.T, source string) (*config.Config, error) {
	t.Helper()
	yaml := fmt.Sprintf(`syncs:
  - id: s
    source: %s
    destination: {type: webhook, url: https://example.com/hook}
    mapping: {fields: {email: email}}
`, source)
	return config.Parse("s.yaml", []byte(yaml), envMap(nil), kinds)
}

// TestSourceTimeout: the common source key bounds one read of the source;
// it defaults to 10m for every type, 0s turns it off, other values are
// checked against their range, and it enters the definition only when set
// otherwise (definitions stored before it stay equal), never what the
// source reads (a cursor stays valid when it changes).
func TestSourceTimeout(t *testing.T) {
	t.Parallel()
	load := loadWithSource
	for _, src := range []string{"{type: csv, path: a.csv}", "{type: shopify, shop_url: 'https://a.myshopify.com', access_token: x}",
		"{type: postgres, dsn: 'postgres://u@h/db', table: t, identity: id}", "{type: mysql, dsn: 'mysql://u@h/db', table: t, identity: id}"} {
		cfg, err := load(t, src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		s := cfg.Syncs[0]
		def, _ := s.DefinitionJSON()
		if s.Source.Timeout != 10*time.Minute || strings.Contains(def, `"timeout":"10m`) {
			t.Fatalf("%s: Timeout %s, definition %s; want 10m, not in the definition", src, s.Source.Timeout, def)
		}
	}
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{{"30m", 30 * time.Minute}, {"0s", 0}, {"1s", time.Second}, {"24h", 24 * time.Hour}} {
		cfg, err := load(t, "{type: postgres, dsn: 'postgres://u@h/db', table: t, identity: id, timeout: "+tc.v+"}")
		if err != nil {
			t.Fatalf("timeout %s: %v", tc.v, err)
		}
		s := cfg.Syncs[0]
		if s.Source.Timeout != tc.want {
			t.Fatalf("timeout %s: got %s", tc.v, s.Source.Timeout)
		}
		def, _ := s.DefinitionJSON()
		if tc.want != 0 && !strings.Contains(def, `"timeout":"`+tc.want.String()+`"`) {
			t.Fatalf("timeout %s: not in the definition %s", tc.v, def)
		}
		reads, _ := s.SourceReadJSON()
		if strings.Contains(reads, "timeout") {
			t.Fatalf("timeout %s is in what the source reads: %s", tc.v, reads)
		}
	}
	for _, v := range []string{"500ms", "25h", "-1m"} {
		_, err := load(t, "{type: csv, path: a.csv, timeout: "+v+"}")
		if got := problemsOf(t, err); len(got) != 1 || !strings.Contains(got[0], "syncs[0].source.timeout: must be 0s (no limit) or between 1s and 24h0m0s, got ") {
			t.Fatalf("timeout %s: problems %q", v, got)
		}
	}
	_, err := load(t, "{type: csv, path: a.csv, timeout: soon}")
	if got := problemsOf(t, err); len(got) != 1 || !strings.Contains(got[0], "syncs[0].source.timeout: must be a duration") {
		t.Fatalf("timeout soon: problems %q", got)
	}
}
