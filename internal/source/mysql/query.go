package mysql

import "strings"

// normalizeQuery returns q with comments removed and every run of whitespace
// outside quoted strings and identifiers collapsed to one space, trimmed and
// without trailing semicolons. Two queries that differ only in layout and
// comments normalise alike (and so get the same source ID). MySQL's
// executable comments (/*! ... */, /*+ hints */) change what a query does,
// so they are kept.
func normalizeQuery(q string) string {
	var b strings.Builder
	space := false
	emit := func(s string) {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteString(s)
	}
	toEOL := func(i int) int {
		end := strings.IndexByte(q[i:], '\n')
		if end < 0 {
			return len(q)
		}
		return i + end
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			space = true
			i++
		case c == '#':
			space = true
			i = toEOL(i)
		case c == '-' && strings.HasPrefix(q[i:], "--") && (i+2 == len(q) || strings.IndexByte(" \t\n\r\f\v", q[i+2]) >= 0):
			space = true
			i = toEOL(i)
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			end := strings.Index(q[i+2:], "*/")
			j := len(q)
			if end >= 0 {
				j = i + 2 + end + 2
			}
			if strings.HasPrefix(q[i:], "/*!") || strings.HasPrefix(q[i:], "/*+") {
				emit(q[i:j])
			} else {
				space = true
			}
			i = j
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(q) {
				if q[j] == '\\' && c != '`' {
					j += 2
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // doubled quote
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			j = min(j, len(q))
			emit(q[i:j])
			i = j
		default:
			j := i + 1
			for j < len(q) && !strings.ContainsRune(" \t\n\r\f\v'\"`#-/", rune(q[j])) {
				j++
			}
			emit(q[i:j])
			i = j
		}
	}
	return strings.TrimRight(b.String(), "; ")
}
