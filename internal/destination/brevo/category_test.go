package brevo

import "testing"

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
	if at, ok := got["c"]; ok {
		t.Errorf("c (category type, no options): %+v, want sent as mapped", at)
	}
	if got["d"].typ != "text" {
		t.Errorf("d (text type, no options): %+v, want text", got["d"])
	}
}
