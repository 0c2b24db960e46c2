package config_test

import (
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

func TestWriteModeAndMaxRemovals(t *testing.T) {
	t.Parallel()
	const head = "syncs:\n  - id: s1\n"
	tests := []struct {
		name, body string
		want       string // a problem's text; "" = loads
	}{
		{"mirror on brevo", "    source: {type: csv, path: a.csv, identity: id}\n    destination: {type: brevo, api_key: k, list_ids: [1], write_mode: mirror}\n    mapping: {email: email}\n", ""},
		{"unknown mode", "    source: {type: csv, path: a.csv}\n    destination: {type: brevo, api_key: k, list_ids: [1], write_mode: merge}\n    mapping: {email: email}\n",
			`syncs[0].destination.write_mode: unknown write mode "merge" (valid: upsert, update, create, mirror)`},
		{"webhook upserts only", "    source: {type: csv, path: a.csv}\n    destination: {type: webhook, url: 'https://h.example/x', write_mode: update}\n",
			"webhook destinations do not support write_mode update (supported: upsert)"},
		{"mirror needs identity", "    source: {type: csv, path: a.csv}\n    destination: {type: brevo, api_key: k, list_ids: [1], write_mode: mirror}\n    mapping: {email: email}\n",
			"mirror needs the source's identity column"},
		{"mirror without partitions", "    partitions: 2\n    source: {type: csv, path: a.csv, identity: id}\n    destination: {type: brevo, api_key: k, list_ids: [1], write_mode: mirror}\n    mapping: {email: email}\n",
			"mirror cannot be used with partitions"},
		{"bad max_removals", "    max_removals: 120%\n    source: {type: csv, path: a.csv}\n    destination: {type: brevo, api_key: k, list_ids: [1]}\n    mapping: {email: email}\n",
			`syncs[0].max_removals: must be a count (500) or a percentage from 0% to 100% (10%), got "120%"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse("c.yaml", []byte(head+tt.body), envMap(nil), kinds)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("want no problem, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want a problem containing %q, got %v", tt.want, err)
			}
		})
	}
}

func TestRemovalsOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		r     config.Removals
		total int
		want  int
		str   string
	}{
		{config.Removals{}, 1000, 100, "10%"}, // the default
		{config.Removals{Percent: 5, Set: true}, 1000, 50, "5%"},
		{config.Removals{Percent: 10, Set: true}, 5, 0, "10%"},
		{config.Removals{Count: 7, Set: true}, 1000, 7, "7"},
		{config.Removals{Set: true}, 1000, 0, "0"},
	}
	for _, c := range cases {
		if got := c.r.Of(c.total); got != c.want || c.r.String() != c.str {
			t.Errorf("%+v.Of(%d) = %d (%s), want %d (%s)", c.r, c.total, got, c.r.String(), c.want, c.str)
		}
	}
}
