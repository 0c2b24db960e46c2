package fakebrevo

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestAttributesNotInTheAccountAreDropped: Brevo keeps only the attributes an
// account defines, on a create, an update and an import alike, and answers
// as if all went well; GET /contacts/attributes says which it defines, and an
// attribute created through the API is kept from then on.
func TestAttributesNotInTheAccountAreDropped(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Attributes: DefaultAttributes})
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "attributes": m{"FIRSTNAME": "Ann", "PLAN": "gold"}}), http.StatusCreated)
	b.mustStatus(b.do("PUT", "/v3/contacts/ann%40example.com", m{"attributes": m{"LASTNAME": "Lee", "PLAN": "silver"}}), http.StatusNoContent)
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"jsonBody": []m{{"email": "bob@example.com", "attributes": m{"FIRSTNAME": "Bob", "PLAN": "gold"}}}, "listIds": []int{2}}), http.StatusAccepted)
	b.clock.Advance(time.Second)
	b.holdsExactly("ann@example.com", m{"FIRSTNAME": "Ann", "LASTNAME": "Lee"})
	b.holdsExactly("bob@example.com", m{"FIRSTNAME": "Bob"})

	names := func() map[string]string {
		r := b.do("GET", "/v3/contacts/attributes", nil)
		b.mustStatus(r, http.StatusOK)
		var out struct {
			Attributes []Attribute `json:"attributes"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, a := range out.Attributes {
			got[a.Name] = a.Category
		}
		return got
	}
	if got := names(); got["FIRSTNAME"] != "normal" || got["PLAN"] != "" || len(got) != len(DefaultAttributes) {
		t.Errorf("attributes listed: %v", got)
	}
	b.mustStatus(b.do("POST", "/v3/contacts/attributes/normal/PLAN", m{"type": "text"}), http.StatusCreated)
	b.mustStatus(b.do("POST", "/v3/contacts/attributes/normal/PLAN", m{"type": "text"}), http.StatusBadRequest)
	if got := names(); got["PLAN"] != "normal" {
		t.Errorf("PLAN not listed once created: %v", got)
	}
	b.mustStatus(b.do("PUT", "/v3/contacts/ann%40example.com", m{"attributes": m{"PLAN": "silver"}}), http.StatusNoContent)
	if c := b.contact("ann@example.com"); c.Attributes["PLAN"] != "silver" {
		t.Errorf("PLAN once created: %v", c.Attributes)
	}
}

// TestFlagsModelAttributesOnlyWhenAsked: `oncesync fake-brevo` stores any
// attribute and lists none until --attribute models an account.
func TestFlagsModelAttributesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		any      bool
		attrs    int
		listCode int
	}{
		{nil, true, 0, http.StatusNotFound},
		{[]string{"--attribute", "plan,shoe:float", "--attribute=CITY"}, false, len(DefaultAttributes) + 3, http.StatusOK},
	} {
		var o Options
		fs := pflag.NewFlagSet("fake-brevo", pflag.ContinueOnError)
		RegisterFlags(fs, &o)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if o.AnyAttribute != tc.any || len(o.Attributes) != tc.attrs {
			t.Fatalf("%v: AnyAttribute %v, %d attributes; want %v, %d", tc.args, o.AnyAttribute, len(o.Attributes), tc.any, tc.attrs)
		}
		o.Clock = nil
		b := setup(t, o)
		b.mustStatus(b.do("GET", "/v3/contacts/attributes", nil), tc.listCode)
		b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "attributes": m{"PLAN": "gold", "SHOE": "42"}}), http.StatusCreated)
		c := b.contact("ann@example.com")
		// SHOE is a float attribute when modelled: the string "42" is dropped.
		if _, kept := c.Attributes["SHOE"]; kept != tc.any || c.Attributes["PLAN"] != "gold" {
			t.Errorf("%v: stored %v", tc.args, c.Attributes)
		}
	}
	var o Options
	fs := pflag.NewFlagSet("fake-brevo", pflag.ContinueOnError)
	RegisterFlags(fs, &o)
	if err := fs.Parse([]string{"--attribute", "no spaces"}); err == nil {
		t.Error("an attribute name with a space was accepted")
	}
	if err := fs.Parse([]string{"--attribute", "AGE:integer"}); err == nil {
		t.Error("an attribute type Brevo does not have was accepted")
	}
	o = Options{}
	fs = pflag.NewFlagSet("fake-brevo", pflag.ContinueOnError)
	RegisterFlags(fs, &o)
	if err := fs.Parse([]string{"--attribute", "GENDER:category=Men|Women,plan"}); err != nil {
		t.Fatal(err)
	}
	if g := o.Attributes[len(o.Attributes)-2]; g.Category != "category" || !slices.Equal(g.Enumeration, []Option{{1, "Men"}, {2, "Women"}}) {
		t.Errorf("GENDER:category=Men|Women gave %+v", g)
	}
	if got := fs.Lookup("attribute").Value.String(); got != "GENDER:category=Men|Women,PLAN" {
		t.Errorf("the flag reads back as %q", got)
	}
	if err := fs.Parse([]string{"--attribute", "TIER:category="}); err == nil {
		t.Error("a category attribute without options was accepted")
	}
}

// TestValuesNotOfTheAttributeTypeAreDropped: Brevo ignores a value that does
// not match its attribute's type, on a create, an update and an import, and
// answers as if all went well; values of the type are kept.
func TestValuesNotOfTheAttributeTypeAreDropped(t *testing.T) {
	t.Parallel()
	attrs := append(WithAttributes(),
		Attribute{Name: "BIRTHDAY", Category: "normal", Type: "date"},
		Attribute{Name: "SCORE", Category: "normal", Type: "float"},
		Attribute{Name: "VIP", Category: "normal", Type: "boolean"})
	b := setup(t, Options{Attributes: attrs})
	bad := m{"FIRSTNAME": "X", "BIRTHDAY": "17/05/1990", "SCORE": "12", "VIP": "yes"}
	good := m{"FIRSTNAME": "Y", "BIRTHDAY": "1990-05-17", "SCORE": 12.5, "VIP": true}
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "attributes": bad}), http.StatusCreated)
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "bob@example.com", "attributes": good}), http.StatusCreated)
	b.mustStatus(b.do("PUT", "/v3/contacts/bob%40example.com", m{"attributes": m{"BIRTHDAY": "tomorrow", "SCORE": true, "VIP": 1}}), http.StatusNoContent)
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"jsonBody": []m{{"email": "cy@example.com", "attributes": bad}, {"email": "di@example.com", "attributes": good}}, "listIds": []int{2}}), http.StatusAccepted)
	b.clock.Advance(time.Second)
	for _, email := range []string{"ann@example.com", "cy@example.com"} {
		if c := b.contact(email); len(c.Attributes) != 1 || c.Attributes["FIRSTNAME"] != "X" {
			t.Errorf("%s: kept %v, want only FIRSTNAME", email, c.Attributes)
		}
	}
	for _, email := range []string{"bob@example.com", "di@example.com"} {
		c := b.contact(email)
		if c.Attributes["BIRTHDAY"] != "1990-05-17" || c.Attributes["SCORE"] != 12.5 || c.Attributes["VIP"] != true {
			t.Errorf("%s: kept %v, want the typed values (the update's dropped)", email, c.Attributes)
		}
	}
	if got := b.srv.Stats().ValuesDropped; got != 9 {
		t.Errorf("ValuesDropped = %d, want 9 (3 values x 3 writes)", got)
	}
}

// TestCategoryAttributeKeepsOptionNumbers: a category attribute is listed
// with its options and keeps the number of one of them; a label, or a
// number no option has, is dropped as Brevo drops a value not of its
// attribute's type. An attribute created with an enumeration has it.
func TestCategoryAttributeKeepsOptionNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Attributes: append(WithAttributes(), CategoryAttribute("GENDER", "Men", "Women"))})
	b.mustStatus(b.do("POST", "/v3/contacts/attributes/category/TIER", m{"type": "category",
		"enumeration": []m{{"value": 5, "label": "Gold"}}}), http.StatusCreated)
	resp := b.do("GET", "/v3/contacts/attributes", nil)
	b.mustStatus(resp, http.StatusOK)
	var listed struct{ Attributes []Attribute }
	if err := json.Unmarshal(resp.body, &listed); err != nil {
		t.Fatal(err)
	}
	opts := map[string][]Option{}
	for _, a := range listed.Attributes {
		if a.Category == "category" {
			opts[a.Name] = a.Enumeration
		}
	}
	if want := []Option{{1, "Men"}, {2, "Women"}}; !slices.Equal(opts["GENDER"], want) || !slices.Equal(opts["TIER"], []Option{{5, "Gold"}}) {
		t.Fatalf("listed options %v, want GENDER %v and TIER 5 Gold", opts, want)
	}
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "attributes": m{"GENDER": 2, "TIER": 5}}), http.StatusCreated)
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "bob@example.com", "attributes": m{"GENDER": "Women", "TIER": 1}}), http.StatusCreated)
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"jsonBody": []m{{"email": "cy@example.com", "attributes": m{"GENDER": 1}},
		{"email": "di@example.com", "attributes": m{"GENDER": "1"}}}, "listIds": []int{2}}), http.StatusAccepted)
	b.clock.Advance(time.Second)
	for email, want := range map[string]m{"ann@example.com": {"GENDER": 2.0, "TIER": 5.0}, "bob@example.com": {}, "cy@example.com": {"GENDER": 1.0}, "di@example.com": {}} {
		b.holdsExactly(email, want)
	}
	if got := b.srv.Stats().ValuesDropped; got != 3 {
		t.Errorf("ValuesDropped = %d, want 3 (a label, a number no option has, a numeric text)", got)
	}
}

// TestMultipleChoiceAttributeKeepsAList: a multiple-choice attribute holds a
// list of its options (createDoiContact's example COUNTRIES:
// ["India","China"]) and is listed with its type. A single write's "" is
// text, not a list: dropped, the old options left in place; null erases
// them; an import's "" is an empty field, which emptyContactsAttributes
// erases.
func TestMultipleChoiceAttributeKeepsAList(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Attributes: append(WithAttributes(), Attribute{Name: "COUNTRIES", Category: "normal", Type: "multiple-choice"})})
	resp := b.do("GET", "/v3/contacts/attributes", nil)
	b.mustStatus(resp, http.StatusOK)
	if !strings.Contains(string(resp.body), `{"name":"COUNTRIES","category":"normal","type":"multiple-choice"}`) {
		t.Fatalf("listing %s, want COUNTRIES of type multiple-choice", resp.body)
	}
	list := []any{"India", "China"}
	for _, email := range []string{"ann@example.com", "bob@example.com", "cy@example.com"} {
		b.mustStatus(b.do("POST", "/v3/contacts", m{"email": email, "attributes": m{"COUNTRIES": list}}), http.StatusCreated)
	}
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "updateEnabled": true, "attributes": m{"COUNTRIES": ""}}), http.StatusNoContent)
	b.mustStatus(b.do("PUT", "/v3/contacts/ann%40example.com", m{"attributes": m{"COUNTRIES": "India"}}), http.StatusNoContent)
	b.mustStatus(b.do("PUT", "/v3/contacts/bob%40example.com", m{"attributes": m{"COUNTRIES": nil}}), http.StatusNoContent)
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"jsonBody": []m{{"email": "cy@example.com", "attributes": m{"COUNTRIES": ""}}},
		"listIds": []int{2}, "emptyContactsAttributes": true}), http.StatusAccepted)
	b.clock.Advance(time.Second)
	if c := b.contact("ann@example.com"); !reflect.DeepEqual(c.Attributes, m{"COUNTRIES": list}) {
		t.Errorf("ann: %v, want the list kept (a \"\" and a text dropped)", c.Attributes)
	}
	b.holdsExactly("bob@example.com", m{})
	b.holdsExactly("cy@example.com", m{})
	if got := b.srv.Stats().ValuesDropped; got != 2 {
		t.Errorf("ValuesDropped = %d, want 2 (a single write's \"\" and a text)", got)
	}
}
