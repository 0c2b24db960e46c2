package brevo

import (
	"encoding/json"
	"github.com/oncesync/oncesync/internal/destination"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		body      string
		code, msg string
		ok        bool
	}{
		{"brevo error", `{"code":"invalid_parameter","message":"Invalid email address"}`, "invalid_parameter", "Invalid email address", true},
		{"code only", `{"code":"unauthorized"}`, "unauthorized", "", true},
		{"message only", `{"message":"Key not found"}`, "", "Key not found", true},
		{"extra fields", `{"code":"x","message":"y","hint":1}`, "x", "y", true},
		{"empty object", `{}`, "", "", false},
		{"null", `null`, "", "", false},
		{"array", `[{"code":"x"}]`, "", "", false},
		{"wrong types", `{"code":1,"message":["x"]}`, "", "", false},
		{"empty strings", `{"code":"","message":""}`, "", "", false},
		{"html", `<html>502 Bad Gateway</html>`, "", "", false},
		{"empty", ``, "", "", false},
		{"long message cut", `{"code":"x","message":"` + strings.Repeat("é", 600) + `"}`, "x", strings.Repeat("é", 500), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, msg, ok := DecodeError([]byte(tt.body))
			if code != tt.code || msg != tt.msg || ok != tt.ok {
				t.Errorf("DecodeError(%q) = %q, %q, %v; want %q, %q, %v", tt.body, code, msg, ok, tt.code, tt.msg, tt.ok)
			}
		})
	}
}

func TestAPIErrorRedactsEmails(t *testing.T) {
	t.Parallel()
	e := &APIError{Route: "POST /contacts", Status: 400, Code: "invalid_parameter",
		Message: `Contact "jane.doe+x@example.co.uk" is invalid, see <bob@ex.org>`}
	got := e.Error()
	if strings.Contains(got, "@") {
		t.Errorf("Error() = %q holds an e-mail address", got)
	}
	if !strings.Contains(got, "HTTP 400 invalid_parameter") || !strings.Contains(got, "[email]") {
		t.Errorf("Error() = %q, want status, code and the redacted message", got)
	}
	se := &safeError{err: e, secret: "xkeysib-1"}
	if s := (&safeError{err: &APIError{Route: "x", Status: 401, Message: "bad key xkeysib-1"}, secret: "xkeysib-1"}).Error(); strings.Contains(s, "xkeysib-1") {
		t.Errorf("safeError %q holds the key", s)
	}
	if se.Unwrap() != e {
		t.Errorf("safeError does not unwrap to its cause")
	}
}

func TestValuesEqual(t *testing.T) {
	t.Parallel()
	tests := []struct {
		want, got any
		eq        bool
	}{
		{"Ann", "Ann", true},
		{"Ann", "ann", false},
		{float64(42), json.Number("42"), true},
		{42, json.Number("42.0"), true},
		{"42", json.Number("42"), true},
		{json.Number("42"), "42.00", true},
		{int64(9007199254740993), json.Number("9007199254740993"), true},
		{int64(9007199254740993), json.Number("9007199254740992"), false},
		{"33689965433", json.Number("33689965433"), true},
		{"42a", json.Number("42"), false},
		{true, true, true},
		{true, "true", true},
		{"false", false, true},
		{true, json.Number("1"), false},
		{json.Number("1"), true, true},
		{json.Number("0"), false, true},
		{json.Number("2"), true, false},
		{"x", nil, false},
		{map[string]any{"a": 1}, map[string]any{"a": json.Number("1")}, true},
		{[]any{"a"}, []any{"b"}, false},
	}
	for _, tt := range tests {
		if got := ValuesEqual(tt.want, tt.got); got != tt.eq {
			t.Errorf("ValuesEqual(%#v, %#v) = %v, want %v", tt.want, tt.got, got, tt.eq)
		}
	}
}

func TestEscapeIdentifier(t *testing.T) {
	t.Parallel()
	if got, want := escapeIdentifier("a+b c@x.com"), "a%2Bb%20c%40x.com"; got != want {
		t.Errorf("escapeIdentifier = %q, want %q", got, want)
	}
}

func TestChunks(t *testing.T) {
	t.Parallel()
	d, err := New(Params{APIKey: "k", Mode: ModeBulk, ListIDs: []int64{1}})
	if err != nil {
		t.Fatal(err)
	}
	d.maxBody = 400
	w := &pageWrite{d: d}
	var idx []int
	for i := range 20 {
		w.contacts = append(w.contacts, contact{email: "u@example.com", attrs: map[string]any{"N": strings.Repeat("x", i*5)}})
		idx = append(idx, i)
	}
	w.contacts = append(w.contacts, contact{email: "big@example.com", attrs: map[string]any{"N": strings.Repeat("y", 1000)}})
	idx = append(idx, 20)
	for _, i := range idx {
		c := &w.contacts[i]
		c.attrsJSON, _ = encodeAttrs(c.attrs)
	}
	page := w.encodeImport(idx)
	chunks := page.chunks(d.maxBody)
	seen := 0
	for _, s := range chunks {
		for _, i := range idx[s.from:s.to] {
			if i != seen {
				t.Fatalf("chunks reorder or drop records: got %d, want %d", i, seen)
			}
			seen++
		}
		size := len(page.body(s))
		if size > d.maxBody && s.to-s.from > 1 {
			t.Errorf("chunk of %d records is %d bytes, over %d", s.to-s.from, size, d.maxBody)
		}
	}
	if seen != len(idx) || len(chunks) < 3 {
		t.Errorf("%d records in %d chunks, want all %d in several", seen, len(chunks), len(idx))
	}
}

// FuzzDecodeError checks that DecodeError never panics, returns valid,
// bounded UTF-8, is stable under re-encoding, and that an APIError built from
// its output names no e-mail address.
func FuzzDecodeError(f *testing.F) {
	f.Add([]byte(`{"code":"invalid_parameter","message":"Invalid email address"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		code, msg, ok := DecodeError(body)
		if !ok {
			if code != "" || msg != "" {
				t.Fatalf("not ok but returned %q, %q", code, msg)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("ok for invalid JSON %q", body)
		}
		if !utf8.ValidString(code) || !utf8.ValidString(msg) || len(msg) > maxMessageLen || len(code) > 100 {
			t.Fatalf("bad output %q, %q", code, msg)
		}
		again, _ := json.Marshal(map[string]string{"code": code, "message": msg})
		c2, m2, ok2 := DecodeError(again)
		if !ok2 || c2 != code || m2 != msg {
			t.Fatalf("re-decoding %s = %q, %q, %v", again, c2, m2, ok2)
		}
		text := (&APIError{Route: "POST /contacts", Status: 400, Code: code, Message: msg}).Error()
		if destination.Redact(text) != text {
			t.Fatalf("APIError text %q holds an address", text)
		}
	})
}
