package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

// TestFingerprint: two processes' fingerprints of one sync are equal
// whatever the layout of their files, and name the part that differs when
// the mapping, the API key, the source, another setting or the Redis
// namespace does; the schedule is not part of it.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	const block = `redis: redis://127.0.0.1:6379/0
syncs:
  - id: s1
    schedule: "@hourly"
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: brevo, api_key: "${KEY}", list_ids: [2]}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`
	print := func(t *testing.T, yaml, key, ns string) string {
		t.Helper()
		cfg, err := config.Parse("d.yaml", []byte(yaml), envMap(map[string]string{"KEY": key}), kinds)
		if err != nil {
			t.Fatal(err)
		}
		f, err := cfg.Syncs[0].Fingerprint(ns)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := print(t, block, "xkeysib-one", "oncesync")
	flow := "redis: redis://127.0.0.1:6379/0\n" + `syncs: [{id: s1, schedule: "@hourly", mapping: {attributes: {FIRSTNAME: first_name}, email: email}, destination: {list_ids: [2], type: brevo, api_key: "${KEY}"}, source: {identity: id, path: contacts.csv, type: csv}}]`
	if f := print(t, flow, "xkeysib-one", "oncesync"); f != base {
		t.Fatalf("one sync in two layouts: %s and %s", base, f)
	}
	if strings.Contains(base, "xkeysib") || !strings.HasPrefix(base, config.FingerprintVersion+".") {
		t.Fatalf("fingerprint %q", base)
	}
	for _, tc := range []struct {
		name, yaml, key, ns string
		want                []string
	}{
		{"mapping", strings.Replace(block, "FIRSTNAME: first_name", "FIRSTNAME: last_name", 1), "xkeysib-one", "oncesync", []string{"mapping"}},
		{"api key", block, "xkeysib-two", "oncesync", []string{"destination"}},
		{"lists", strings.Replace(block, "[2]", "[2, 7]", 1), "xkeysib-one", "oncesync", []string{"destination"}},
		{"source", strings.Replace(block, "contacts.csv", "other.csv", 1), "xkeysib-one", "oncesync", []string{"source"}},
		{"partitions", strings.Replace(block, "    source:", "    partitions: 4\n    source:", 1), "xkeysib-one", "oncesync", []string{"settings"}},
		{"namespace", block, "xkeysib-one", "staging", []string{"redis_namespace"}},
		{"schedule", strings.Replace(block, "@hourly", "@daily", 1), "xkeysib-one", "oncesync", nil},
	} {
		got := config.DriftParts(base, print(t, tc.yaml, tc.key, tc.ns))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s changed: parts %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := config.DriftParts(base, "f0.x"); len(got) != 5 {
		t.Errorf("another version's fingerprint: parts %v, want all five", got)
	}
}
