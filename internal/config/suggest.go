package config

import "strings"

// suggest returns the known key closest to key when it is close enough to be
// a likely typo ("pagesize" → "page_size", "PageSize" → "page_size").
func suggest(key string, known []string) string {
	nk := normKey(key)
	best, bestDist := "", 1<<30
	for _, k := range known {
		d := editDistance(nk, normKey(k))
		if d2 := editDistance(strings.ToLower(key), k); d2 < d {
			d = d2
		}
		if d < bestDist {
			best, bestDist = k, d
		}
	}
	limit := 2
	if len(key) <= 4 {
		limit = 1
	}
	if best == "" || bestDist > limit {
		return ""
	}
	return best
}

// normKey lowercases s and drops '_' and '-', so snake, kebab and camel case
// spellings of a key compare equal.
func normKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r != '_' && r != '-' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// editDistance is the optimal-string-alignment distance between a and b
// (Levenshtein plus adjacent transpositions), on bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Keys this long are never typos of a known key.
		return 1 << 20
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
