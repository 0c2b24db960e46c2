package destination_test

import (
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
)

func TestRedactValues(t *testing.T) {
	t.Parallel()
	vals := []string{"Canaryfirst", "+15550199887", `O"Neil`, "Zoë Brontë", "ab", "N42"}
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
	} {
		if got := destination.RedactValues(c.in, vals); got != c.want {
			t.Errorf("RedactValues(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := destination.RedactValues("[value] x", []string{"value"}); got != "[value] x" {
		t.Errorf("token redacted: %q", got)
	}
}

func TestRedactRecord(t *testing.T) {
	t.Parallel()
	data := map[string]any{"email": "jane@example.com", "attributes": map[string]any{"FIRSTNAME": "Janeth", "SCORE": 123456.5, "LISTS": []any{"Premium"}}}
	got := destination.RedactRecord("jane@example.com: Janeth scored 123456.5 in Premium", data)
	if want := "[email]: [value] scored [value] in [value]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := destination.JSONValues([]byte(`{"a":["Janeth",{"b":1234}]}`)); len(got) != 2 {
		t.Errorf("JSONValues = %q", got)
	}
}
