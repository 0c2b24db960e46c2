package source

import (
	"math"
	"testing"
)

// TestIntLookback: an integer cursor value moves back by n and one more,
// or to the start when that falls below the type's smallest value, without
// overflowing at the edges of int64.
func TestIntLookback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text      string
		n, least  int64
		back      string
		start, ok bool
	}{
		{"5000", 1000, math.MinInt64, "3999", false, true},
		{"5", 100, math.MinInt64, "-96", false, true},
		{"5", 100, 0, "", true, true},
		{"101", 100, 0, "0", false, true},
		{"100", 100, 0, "", true, true},
		{"-32700", 100, math.MinInt16, "", true, true},
		{"-9223372036854775800", 100, math.MinInt64, "", true, true},
		{"9223372036854775807", 1000, math.MinInt64, "9223372036854774806", false, true},
		{"18446744073709551615", 1, 0, "", false, false}, // an UNSIGNED BIGINT past int64: left as it is
		{"x", 1, 0, "", false, false},
		{"7", -1, 0, "", false, false},
	} {
		back, start, ok := IntLookback(tc.text, tc.n, tc.least)
		if back != tc.back || start != tc.start || ok != tc.ok {
			t.Errorf("IntLookback(%s, %d, %d) = %q, %v, %v; want %q, %v, %v", tc.text, tc.n, tc.least, back, start, ok, tc.back, tc.start, tc.ok)
		}
	}
}
