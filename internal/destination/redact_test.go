package destination_test

import (
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
)

func TestRedactValues(t *testing.T) {
	t.Parallel()
	vals := []string{"Canaryfirst", "+15550199887", `O"Neil`, "Zoë Brontë", "ab", "N42", "Marie & Paul", "<b>Lé</b>"}
	for _, c := range []struct{ in, want string }{
		{"first name Canaryfirst is too long", "first name [value] is too long"},
		{`{"SMS":"+15550199887"}`, `{"SMS":"[value]"}`},
		// Inside a longer word it is another word.
		{"Canaryfirstborn, N420, xN42", "Canaryfirstborn, N420, xN42"},
		// JSON-escaped, as a raw error body shows it.
		{`{"name":"O\"Neil"}`, `{"name":"[value]"}`},
		{"Zoë Brontë!", "[value]!"},
		// Short values name no one and would blank ordinary words.
		{"ab cd", "ab cd"},
		// A message cut in the middle of an echoed value.
		{"invalid: Canaryfi", "invalid: [value]"},
		{"invalid: +155501", "invalid: [value]"},
		// A redaction's own token is left alone.
		{"[email] and [N42]", "[email] and [[value]]"},
		// As other servers echo them: ASCII-only JSON (Python, PHP), HTML,
		// URL-escaped, in capitals, a phone without its "+".
		{`{"name": "Zo\u00eb Bront\u00eb"}`, `{"name": "[value]"}`},
		{`{"name": "Zo\u00EB Bront\u00EB"}`, `{"name": "[value]"}`},
		{"<p>Invalid O&#34;Neil</p>", "<p>Invalid [value]</p>"},
		{"q=Zo%C3%AB+Bront%C3%AB&x=1", "q=[value]&x=1"},
		{"NAME CANARYFIRST", "NAME [value]"},
		{"sms 15550199887 invalid", "sms [value] invalid"},
		// JSON that escapes HTML's characters, as Go's json.Marshal (and so
		// oncesync's own request bodies) writes them, in either hex case.
		{`{"first_name":"Marie \u0026 Paul"}`, `{"first_name":"[value]"}`},
		{`{"n":"\u003cb\u003eL\u00e9\u003c/b\u003e"}`, `{"n":"[value]"}`},
		{`{"n":"\u003Cb\u003EL\u00E9\u003C/b\u003E"}`, `{"n":"[value]"}`},
	} {
		if got := destination.RedactValues(c.in, vals); got != c.want {
			t.Errorf("RedactValues(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := destination.RedactValues("[value] x", []string{"value"}); got != "[value] x" {
		t.Errorf("token redacted: %q", got)
	}
}

// TestRedactEmailInQuotedJSON: an address inside JSON quoted in a message
// keeps the escapes around it.
func TestRedactEmailInQuotedJSON(t *testing.T) {
	t.Parallel()
	in := `{\"email\":\"ann@x.com\",\"n\":1}`
	if got, want := destination.Redact(in), `{\"email\":\"[email]\",\"n\":1}`; got != want {
		t.Errorf("Redact(%s) = %s, want %s", in, got, want)
	}
}

func TestRedactRecord(t *testing.T) {
	t.Parallel()
	data := map[string]any{"email": "jane@example.com", "attributes": map[string]any{"FIRSTNAME": "Janeth", "SCORE": 123456.5, "LISTS": []any{"Premium"}}}
	got := destination.RedactRecord("jane@example.com: Janeth scored 123456.5 in Premium", data)
	if want := "[email]: [value] scored [value] in [value]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// oncesync's own refusal names no value, and a value may equal one of
	// its words: "invalid [value] address" for a last name "email".
	own := map[string]any{"email": "not-an-email", "attributes": map[string]any{"LASTNAME": "email"}}
	if got, want := destination.RedactRecord("invalid email address"+destination.RefusedBeforeSending, own), "invalid email address"+destination.RefusedBeforeSending; got != want {
		t.Errorf("own refusal: got %q, want %q", got, want)
	}
	if got := destination.RedactRecord("invalid email address", own); got != "invalid [value] address" {
		t.Errorf("a server's message: got %q, want its value hidden", got)
	}
	// A server that echoes the address in other forms, or its local part
	// alone: each names the person.
	data = map[string]any{"email": "reject.person9@example.com"}
	for in, want := range map[string]string{
		"contact reject.person9 refused":                 "contact [value] refused",
		"bad: reject.person9&#64;example.com":            "bad: [value]",
		"bad: reject.person9&#x40;example.com":           "bad: [value]",
		`{"e":"reject.person9\u0040example.com"}`:        `{"e":"[value]"}`,
		"bad: reject.person9%40example.com":              "bad: [value]",
		"reject.person9s is another word, so is xreject": "reject.person9s is another word, so is xreject",
	} {
		if got := destination.RedactRecord(in, data); got != want {
			t.Errorf("RedactRecord(%q) = %q, want %q", in, got, want)
		}
	}
	if got := destination.JSONValues([]byte(`{"a":["Janeth",{"b":1234}]}`)); len(got) != 2 {
		t.Errorf("JSONValues = %q", got)
	}
}
