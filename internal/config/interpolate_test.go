package config

import (
	"slices"
	"testing"
)

func TestInterpolate(t *testing.T) {
	t.Parallel()
	env := envMap(map[string]string{"A": "alpha", "EMPTY": "", "NESTED": "${A}"})
	tests := []struct {
		in, want          string
		vars, unset, empt []string
		err               string
	}{
		{in: "plain", want: "plain"},
		{in: "cost: $5", want: "cost: $5"},
		{in: "${A}", want: "alpha", vars: []string{"A"}},
		{in: "x-${A}-${A}", want: "x-alpha-alpha", vars: []string{"A", "A"}},
		{in: "${B}", want: "", vars: []string{"B"}, unset: []string{"B"}},
		{in: "${B:-dflt}", want: "dflt", vars: []string{"B"}},
		{in: "${EMPTY:-dflt}", want: "dflt", vars: []string{"EMPTY"}},
		{in: "${A:-dflt}", want: "alpha", vars: []string{"A"}},
		{in: "${B:-}", want: "", vars: []string{"B"}},
		{in: "${EMPTY}", want: "", vars: []string{"EMPTY"}, empt: []string{"EMPTY"}},
		{in: "$${A}", want: "${A}"},
		{in: "${NESTED}", want: "${A}", vars: []string{"NESTED"}}, // values are not interpolated again
		{in: "${A", err: `unterminated "${" (write "$${" for a literal "${")`},
		{in: "${}", err: `invalid environment variable name "" in "${}" (use letters, digits and _)`},
		{in: "${A B}", err: `invalid environment variable name "A B" in "${A B}" (use letters, digits and _)`},
	}
	for _, tt := range tests {
		got, in := interpolate(tt.in, env)
		if in.err != tt.err {
			t.Errorf("%q: err %q, want %q", tt.in, in.err, tt.err)
			continue
		}
		if tt.err != "" {
			continue
		}
		if got != tt.want || !slices.Equal(in.vars, tt.vars) || !slices.Equal(in.unset, tt.unset) || !slices.Equal(in.empty, tt.empt) {
			t.Errorf("%q: got %q %+v, want %q vars=%q unset=%q empty=%q", tt.in, got, in, tt.want, tt.vars, tt.unset, tt.empt)
		}
	}
}

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
	cfg, err := Parse("i.yaml", []byte(yaml), envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Syncs[0]
	if cfg.Settings.LeaseTTL.String() != "45s" || cfg.Settings.BreakerFailures != 7 {
		t.Errorf("settings = %+v", cfg.Settings)
	}
	if s.ID != "from-env" || s.Source.Path != "/data/contacts.csv" || s.Source.PageSize != 250 || s.Destination.URL != "https://example.com/hook" {
		t.Errorf("sync = %+v", s)
	}
	if s.Destination.Headers["X-Literal"] != "${NOT_A_VAR}" || s.Destination.Headers["X-Token"] != "t0k" || s.Mapping.Fields["note"] != "c\n" {
		t.Errorf("headers/fields = %q %q", s.Destination.Headers, s.Mapping.Fields)
	}
	if !slices.Contains(cfg.SecretValues(), "t0k") {
		t.Errorf("a variable interpolated into a header is a secret: %q", cfg.SecretValues())
	}
	if slices.Contains(cfg.SecretValues(), "250") {
		t.Errorf("a variable interpolated into page_size is not a secret: %q", cfg.SecretValues())
	}

	_, err = Parse("i.yaml", []byte("${KEY}: 1\n"), envMap(map[string]string{"KEY": "store"}))
	if got := problemsOf(t, err); len(got) != 2 || got[0] != `i.yaml:1: ${KEY}: unknown key "${KEY}" (valid keys: alerts, allow_evicting_redis, redis, settings, store, syncs, web)` {
		t.Errorf("keys must not be interpolated: %q", got)
	}
}
