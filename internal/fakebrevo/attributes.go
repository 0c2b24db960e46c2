package fakebrevo

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The account's contact attributes. Brevo stores only the attributes an
// account defines: "Any contact attribute that doesn't exist in your account
// will be ignored at import end" (POST /contacts/import), and a single
// create or update that names one answers 201/204 without it (the attributes
// "must be present in your Brevo account"; a public report, getbrevo/brevo-php
// issue 37, shows the contact created without them). The fake does the same:
// a write's attributes outside Options.Attributes are dropped without a word,
// on every path. GET /contacts/attributes lists them (getAttributes in
// swagger.yaml), and POST /contacts/attributes/{category}/{name} adds one.
// Brevo also ignores a value that does not match its attribute's type
// ("Values that don't match the attribute type (e.g. text or string in a date
// attribute) will be ignored", createContact and updateContact in
// swagger.yaml): the fake drops, on every path, a date attribute's value
// that is not a date written YYYY-MM-DD, a float's that is not a JSON number
// and a boolean's that is not true or false (the unkindest reading: a
// numeric string is not a number). A category attribute (category
// "category", listed with its enumeration) keeps the number of one of its
// options ("ID of Value of the category type attribute",
// getAttributes_enumeration): the fake drops anything else, a label
// included (Brevo does not document taking one). Text and id attributes
// take any value. A multiple-choice attribute (createAttribute's type enum
// and multiCategoryOptions, ["USA","INDIA"]) holds a list of its options, as
// createDoiContact's example COUNTRIES: ["India","China"]: the fake keeps a
// JSON array of strings and drops anything else, "" included (text, not a
// list: "Values that don't match the attribute type ... will be ignored"),
// so that a single write's "" leaves the old options in place; an import's
// "" is an empty field, which emptyContactsAttributes erases (imports.go).
// Stats.ValuesDropped counts both kinds of drop. A JSON number
// is kept as a double (float64), whatever the attribute's type: Brevo
// documents float attributes, no integers, so an integer above 2^53 comes
// back cut.

// Attribute is one of the account's contact attributes.
type Attribute struct {
	Name     string `json:"name"`
	Category string `json:"category"` // normal, transactional, category, calculated, global
	Type     string `json:"type,omitempty"`
	// Enumeration is a category attribute's options.
	Enumeration []Option `json:"enumeration,omitempty"`
}

// Option is one of a category attribute's values (getAttributes_enumeration).
type Option struct {
	Value int64  `json:"value"`
	Label string `json:"label"`
}

// CategoryAttribute is attribute name of the category category with one
// option per label, numbered from 1 (as Brevo's example, GENDER: 1 Men, 2
// Women, 3 Kid). It is listed with type text, as swagger.yaml's example of
// getAttributes lists GENDER.
func CategoryAttribute(name string, labels ...string) Attribute {
	a := Attribute{Name: strings.ToUpper(name), Category: "category", Type: "text"}
	for i, l := range labels {
		a.Enumeration = append(a.Enumeration, Option{Value: int64(i + 1), Label: l})
	}
	return a
}

// DefaultAttributes are the attributes of the fake's account when
// Options.Attributes is nil: those a new Brevo account has (its name and
// identifier attributes).
var DefaultAttributes = []Attribute{
	{Name: "EMAIL", Category: "normal", Type: "text"},
	{Name: "FIRSTNAME", Category: "normal", Type: "text"},
	{Name: "LASTNAME", Category: "normal", Type: "text"},
	{Name: "SMS", Category: "normal", Type: "text"},
	{Name: "WHATSAPP", Category: "normal", Type: "text"},
	{Name: "LANDLINE_NUMBER", Category: "normal", Type: "text"},
	{Name: "EXT_ID", Category: "normal", Type: "text"},
}

// WithAttributes is DefaultAttributes and, for each name, a text attribute of
// the normal category: an account where a person created those.
func WithAttributes(names ...string) []Attribute {
	out := slices.Clone(DefaultAttributes)
	for _, n := range names {
		out = append(out, textAttribute(n))
	}
	return out
}

// textAttribute is attribute name, as a person creates one: text, in the
// normal category.
func textAttribute(name string) Attribute {
	return Attribute{Name: strings.ToUpper(name), Category: "normal", Type: "text"}
}

// attributeTypes are the types a normal attribute can have (getAttributes in
// swagger.yaml).
var attributeTypes = []string{"text", "date", "float", "boolean", "id"}

// attributeCategories are createAttribute's attributeCategory values.
var attributeCategories = []string{"normal", "transactional", "category", "calculated", "global"}

func (s *Server) initAttributesLocked() {
	attrs := s.opts.Attributes
	if attrs == nil {
		attrs = DefaultAttributes
	}
	s.attrs = make(map[string]Attribute, len(attrs))
	for _, a := range attrs {
		a.Name = strings.ToUpper(a.Name)
		s.attrs[a.Name] = a
	}
}

// definedLocked reports whether the account defines attribute name
// (upper-case).
func (s *Server) definedLocked(name string) bool {
	if s.opts.AnyAttribute {
		return true
	}
	_, ok := s.attrs[name]
	return ok
}

// keepsLocked reports whether the account stores v (not nil) as attribute
// name (upper-case): the attribute exists and v matches its type.
func (s *Server) keepsLocked(name string, v any) bool {
	if s.opts.AnyAttribute {
		return true
	}
	a, ok := s.attrs[name]
	if ok && a.Category == "category" {
		return isOption(a.Enumeration, v)
	}
	return ok && fitsType(a.Type, v)
}

// isOption reports whether v (as JSON decodes it) is the number of one of
// opts.
func isOption(opts []Option, v any) bool {
	var n int64
	switch x := v.(type) {
	case float64:
		if x != float64(int64(x)) {
			return false
		}
		n = int64(x)
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			return false
		}
		n = i
	default:
		return false
	}
	return slices.ContainsFunc(opts, func(o Option) bool { return o.Value == n })
}

// fitsType reports whether Brevo keeps value v (as JSON decodes it) in an
// attribute of type typ: see the comment at the top of this file.
func fitsType(typ string, v any) bool {
	switch typ {
	case "date":
		d, ok := v.(string)
		if !ok || len(d) != len(dateLayout) {
			return false
		}
		_, err := time.Parse(dateLayout, d)
		return err == nil
	case "float":
		switch v.(type) {
		case float64, json.Number:
			return true
		}
		return false
	case "boolean":
		_, ok := v.(bool)
		return ok
	case multipleChoice:
		list, ok := v.([]any)
		for _, o := range list {
			if _, isText := o.(string); !isText {
				return false
			}
		}
		return ok
	}
	return true
}

// multipleChoice is the type of an attribute holding a list of options
// (createAttribute in swagger.yaml). getAttributes' type enum predates it:
// the validator's copy of the spec admits it in responses (loadSpec).
const multipleChoice = "multiple-choice"

// dateLayout is how Brevo's API writes a date attribute's value.
const dateLayout = "2006-01-02"

// unmodelled answers an attribute call when Options.AnyAttribute is set,
// and reports whether it did.
func (s *Server) unmodelled(c *call) bool {
	if s.opts.AnyAttribute {
		s.fail(c, http.StatusNotFound, CodeDocumentNotFound, "The fake Brevo does not model attributes: it stores any (start it with --attribute to model an account's)")
	}
	return s.opts.AnyAttribute
}

func (s *Server) getAttributes(c *call) {
	if s.unmodelled(c) {
		return
	}
	s.mu.Lock()
	out := make([]Attribute, 0, len(s.attrs))
	for _, a := range s.attrs {
		out = append(out, a)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Attribute) int { return strings.Compare(a.Name, b.Name) })
	s.respond(c, http.StatusOK, struct {
		Attributes []Attribute `json:"attributes"`
	}{out})
}

// createAttribute is POST /contacts/attributes/{attributeCategory}/{attributeName}.
func (s *Server) createAttribute(c *call, category, name string) {
	if s.unmodelled(c) {
		return
	}
	if !slices.Contains(attributeCategories, category) {
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, "attributeCategory must be one of normal, transactional, category, calculated, global")
		return
	}
	var req struct {
		Type        string   `json:"type"`
		Enumeration []Option `json:"enumeration"`
	}
	if len(c.body) > 0 {
		if err := decodeObject(c.body, &req); err != nil {
			s.fail(c, http.StatusBadRequest, CodeBadRequest, msgInvalidJSON)
			return
		}
	}
	if req.Type == "" || category == "category" {
		// A category attribute is created with type category and listed
		// with type text, as getAttributes' example lists GENDER (its
		// schema has no type category).
		req.Type = "text"
	}
	name = strings.ToUpper(name)
	s.mu.Lock()
	if s.definedLocked(name) {
		s.mu.Unlock()
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, "Attribute name must be unique")
		return
	}
	s.attrs[name] = Attribute{Name: name, Category: category, Type: req.Type, Enumeration: req.Enumeration}
	s.mu.Unlock()
	s.respond(c, http.StatusCreated, nil)
}
