package destination

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MinValueLen is the shortest value RedactValues hides: shorter ones ("1",
// "US") name no one, and hiding them would blank ordinary words of a
// message.
const MinValueLen = 3

// RecordValues returns the text of every string and number in v (a
// record's Data, or a decoded JSON request body), nested maps and lists
// included: what a server could echo back in a message.
func RecordValues(v any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case json.Number:
			out = append(out, x.String())
		case float64:
			out = append(out, strconv.FormatFloat(x, 'f', -1, 64))
		case float32:
			out = append(out, strconv.FormatFloat(float64(x), 'f', -1, 32))
		case int:
			out = append(out, strconv.Itoa(x))
		case int64:
			out = append(out, strconv.FormatInt(x, 10))
		case int32:
			out = append(out, strconv.FormatInt(int64(x), 10))
		case uint64:
			out = append(out, strconv.FormatUint(x, 10))
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case []string:
			out = append(out, x...)
		}
	}
	walk(v)
	return out
}

// JSONValues returns RecordValues of a JSON document (a request body), or
// nil when body is not JSON.
func JSONValues(body []byte) []string {
	if len(body) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	return RecordValues(v)
}

// RedactValues replaces in s every occurrence of one of values (of at
// least MinValueLen bytes, standing as a whole word: not inside a longer
// run of letters and digits) with "[value]", as written or JSON-escaped,
// and a value's start cut off at the end of s (a message truncated in the
// middle of an echoed value). A server echoes what it was sent (names,
// phone numbers) in its messages, and those are stored and shown
// (docs/guide.md#the-sync-pages-and-the-api).
func RedactValues(s string, values []string) string {
	if s == "" || len(values) == 0 {
		return s
	}
	vs := make([]string, 0, len(values))
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) < MinValueLen {
			continue
		}
		vs = append(vs, valueForms(v)...)
	}
	// Longest first: a value inside a longer one is hidden with it.
	sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	vs = slices.Compact(vs)
	for _, v := range vs {
		s = replaceWord(s, v)
	}
	for _, v := range vs {
		s = redactCutTail(s, v)
	}
	return s
}

// valueForms are the ways a server may echo v: as sent, JSON-escaped (Go's
// way, and ASCII-only as Python's json.dumps and PHP's json_encode write
// it), HTML-escaped, URL-escaped, a phone number without its "+", and an
// e-mail address's other forms.
// Case is matched apart (replaceWord).
func valueForms(v string) []string {
	forms := []string{v, html.EscapeString(v), strings.ReplaceAll(html.EscapeString(v), "&#39;", "&#x27;"),
		url.QueryEscape(v), url.PathEscape(v)}
	// JSON as written by encoders that escape HTML's <, > and & (Go's
	// json.Marshal: "\u0026", oncesync's own bodies included) and those
	// that do not, each also with every non-ASCII character escaped (hex
	// digits match in either case: replaceWord).
	for _, e := range []string{jsonEscaped(v, false), jsonEscaped(v, true)} {
		forms = append(forms, e, asciiJSON(e, "\\u%04x"))
	}
	if local, _, ok := strings.Cut(v, "@"); ok {
		// An e-mail address: its "@" as an HTML entity or a JSON escape, as
		// other servers write it, and its local part alone ("contact
		// jane.doe"), which names the person as well (an independent
		// check, 2026-12-06).
		for _, at := range []string{"&#64;", "&#x40;", "&#X40;", `\u0040`} {
			forms = append(forms, strings.ReplaceAll(v, "@", at))
		}
		forms = append(forms, local)
	}
	if rest, ok := strings.CutPrefix(v, "+"); ok && len(rest) >= MinValueLen && strings.Trim(rest, "0123456789 -") == "" {
		forms = append(forms, rest, strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, rest))
	}
	out := forms[:0]
	for _, f := range forms {
		if len(f) >= MinValueLen && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// asciiJSON is the JSON-escaped string e with every non-ASCII character as
// \uXXXX (surrogate pairs beyond the BMP), in the hex case of format.
func asciiJSON(e, format string) string {
	var b strings.Builder
	for _, r := range e {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, format+format, r1, r2)
		default:
			fmt.Fprintf(&b, format, r)
		}
	}
	return b.String()
}

// RefusedBeforeSending ends the message of a record a destination
// connector refuses before sending it (an invalid address, a value too
// long): the text is oncesync's own and names no value.
const RefusedBeforeSending = " (refused by oncesync before sending)"

// RedactRecord is the stored message of a record a destination refused:
// Redact, and RedactValues of the record's own values (data) unless the
// message is oncesync's own (RefusedBeforeSending), whose words a value
// may equal: "invalid [value] address" for a record whose last name was
// "email" (an independent check, 2026-12-06).
func RedactRecord(s string, data map[string]any) string {
	if s == "" {
		return s
	}
	s = Redact(s)
	if len(data) > 0 && !strings.HasSuffix(s, RefusedBeforeSending) {
		s = RedactValues(s, RecordValues(data))
	}
	return s
}

const valueToken = "[value]"

// replaceWord replaces every occurrence of v in s that is not part of a
// longer word.
func replaceWord(s, v string) string {
	var b strings.Builder
	from := 0
	// ASCII letters match in either case ("ANN SMITH" for "Ann Smith"):
	// lowering them keeps every byte offset.
	ls, lv := asciiLower(s), asciiLower(v)
	for {
		i := strings.Index(ls[from:], lv)
		if i < 0 {
			break
		}
		i += from
		end := i + len(v)
		if wordEdge(s, i, v) && wordEdgeAfter(s, end, v) && !inToken(s, i, end) {
			b.WriteString(s[from:i])
			b.WriteString(valueToken)
		} else {
			b.WriteString(s[from:end])
		}
		from = end
	}
	if from == 0 {
		return s
	}
	b.WriteString(s[from:])
	return b.String()
}

// redactCutTail hides a start of v (at least MinValueLen bytes) that ends
// s.
func redactCutTail(s, v string) string {
	for k := len(v) - 1; k >= MinValueLen; k-- {
		if !utf8.RuneStart(v[k]) {
			continue
		}
		if p := v[:k]; strings.HasSuffix(s, p) && wordEdge(s, len(s)-k, v) {
			return s[:len(s)-k] + valueToken
		}
	}
	return s
}

// wordEdge: the match of v at i does not continue a word (v's own first
// character is not a letter or digit, or the one before it is not).
func wordEdge(s string, i int, v string) bool {
	first, _ := utf8.DecodeRuneInString(v)
	if !isWord(first) || i == 0 {
		return true
	}
	prev, _ := utf8.DecodeLastRuneInString(s[:i])
	return !isWord(prev)
}

func wordEdgeAfter(s string, end int, v string) bool {
	last, _ := utf8.DecodeLastRuneInString(v)
	if !isWord(last) || end >= len(s) {
		return true
	}
	next, _ := utf8.DecodeRuneInString(s[end:])
	return !isWord(next)
}

// inToken: s[i:end] is the word of a redaction's own token ("[email]",
// "[redacted]"), which is left alone.
func inToken(s string, i, end int) bool {
	if i == 0 || end >= len(s) || s[i-1] != '[' || s[end] != ']' {
		return false
	}
	switch s[i:end] {
	case "email", "value", "redacted":
		return true
	}
	return false
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// asciiLower is s with its ASCII capitals lowered (same length).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// jsonEscaped is v as it appears inside a JSON string, with <, > and &
// escaped if escapeHTML.
func jsonEscaped(v string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	if enc.Encode(v) != nil {
		return v
	}
	e := bytes.TrimSpace(b.Bytes())
	return string(e[1 : len(e)-1])
}
