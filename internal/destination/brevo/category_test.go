package brevo

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
)

// TestCategoryAttributeTypes: a category attribute is typed by its options
// whether Brevo lists it with type text (swagger.yaml's example) or
// category (createAttribute's type); listed without options, it is sent as
// mapped (a category-typed one too), not refused whatever its value.
func TestCategoryAttributeTypes(t *testing.T) {
	t.Parallel()
	opts := []option{{1, "Men"}, {2, "Women"}}
	d := &Destination{attrs: []string{"a", "b", "c", "d"}}
	got := d.typedAttributes(map[string]attribute{
		"A": {category: "category", typ: "text", options: opts},
		"B": {category: "category", typ: "category", options: opts},
		"C": {category: "category", typ: "category"},
		"D": {category: "category", typ: "text"},
	})
	for _, name := range []string{"a", "b"} {
		if got[name].typ != categoryCategory || len(got[name].options) != 2 {
			t.Errorf("%s: %+v, want a category with 2 options", name, got[name])
		}
	}
	if at := got["c"]; at.typ != asMapped || at.options != nil {
		t.Errorf("c (category type, no options): %+v, want sent as mapped", at)
	}
	if got["d"].typ != "text" {
		t.Errorf("d (text type, no options): %+v, want text", got["d"])
	}
}

// TestCheckTellsUnconvertedTypes: an attribute of a type oncesync does not
// convert (a multiple-choice attribute, which holds a list of options) is
// named by check, since Brevo drops a value not of its type without an
// error and nothing else would tell.
func TestCheckTellsUnconvertedTypes(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v3/contacts/attributes":
			fmt.Fprint(w, `{"attributes":[{"name":"EMAIL","category":"normal","type":"text"},`+
				`{"name":"COUNTRIES","category":"normal","type":"multiple-choice"},{"name":"SCORE","category":"normal","type":"float"}]}`)
		default:
			fmt.Fprint(w, `{}`)
		}
	}))
	t.Cleanup(srv.Close)
	d := newStubDest(t, srv, ModeSingle)
	d.attrs = []string{"COUNTRIES", "SCORE"}
	checked, err := d.Check(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	for _, l := range checked {
		if strings.HasPrefix(l, destination.NotChecked) {
			told = append(told, l)
		}
	}
	if len(told) != 1 || !strings.Contains(told[0], "attribute COUNTRIES has type multiple-choice") || !strings.Contains(told[0], "JSON array") {
		t.Fatalf("check told %q, want one line about COUNTRIES", told)
	}
}
