package config_test

import (
	"github.com/oncesync/oncesync/internal/config"
	"slices"
	"testing"
)

func TestInterpolationInConfig(t *testing.T) {
	t.Parallel()
	// References work in flow collections (where YAML forbids '{' in plain
	// scalars), in quoted and block scalars, feed numbers and durations, and
	// keys are never interpolated.
	yaml := `settings: {lease_ttl: ${TTL:-45s}, breaker_failures: ${BREAKER}}
syncs:
  - id: ${ID}
    source: {type: csv, path: "${DIR}/contacts.csv", page_size: ${PAGE}}
    destination:
      type: webhook
      url: https://${HOST}/hook
      headers: {X-Literal: "$${NOT_A_VAR}", X-Token: ${TOKEN}}
    mapping:
      fields:
        note: |
          ${COL}
`
	env := map[string]string{"BREAKER": "7", "ID": "from-env", "DIR": "/data", "PAGE": "250", "HOST": "example.com", "TOKEN": "t0k", "COL": "c"}
	cfg, err := config.Parse("i.yaml", []byte(yaml), envMap(env), kinds)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Syncs[0]
	if cfg.Settings.LeaseTTL.String() != "45s" || cfg.Settings.BreakerFailures != 7 {
		t.Errorf("settings = %+v", cfg.Settings)
	}
	if s.ID != "from-env" || fileOf(s).Path != "/data/contacts.csv" || s.Source.PageSize != 250 || webhookOf(s).URL != "https://example.com/hook" {
		t.Errorf("sync = %+v", s)
	}
	if webhookOf(s).Headers["X-Literal"] != "${NOT_A_VAR}" || webhookOf(s).Headers["X-Token"] != "t0k" || webhookOf(s).Fields["note"] != "c\n" {
		t.Errorf("headers/fields = %q %q", webhookOf(s).Headers, webhookOf(s).Fields)
	}
	if !slices.Contains(cfg.SecretValues(), "t0k") {
		t.Errorf("a variable interpolated into a header is a secret: %q", cfg.SecretValues())
	}
	if slices.Contains(cfg.SecretValues(), "250") {
		t.Errorf("a variable interpolated into page_size is not a secret: %q", cfg.SecretValues())
	}

	_, err = config.Parse("i.yaml", []byte("${KEY}: 1\n"), envMap(map[string]string{"KEY": "store"}), kinds)
	if got := problemsOf(t, err); len(got) != 2 || got[0] != `i.yaml:1: ${KEY}: unknown key "${KEY}" (valid keys: alerts, allow_evicting_redis, redis, redis_namespace, settings, store, syncs, web)` {
		t.Errorf("keys must not be interpolated: %q", got)
	}
}
