package config

import (
	"slices"
	"testing"
)

func TestInterpolate(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"A": "alpha", "EMPTY": "", "NESTED": "${A}"}
	env := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
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
