package brevo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/failure"
)

// Brevo keeps only the contact attributes an account defines: a write that
// names another is answered as a success, without it ("Any contact attribute
// that doesn't exist in your account will be ignored at import end"; a single
// create or update does the same). A mapped attribute the account lacks
// would lose every value written to it, without a single error, so `oncesync
// check` and each run that writes read the account's attributes first
// (GET /contacts/attributes) and refuse such a mapping
// (docs/guide.md#brevo-attributes).

// attributesRoute is the account's attribute list.
const attributesRoute = "GET /contacts/attributes"

// readOnlyCategories are attribute categories Brevo computes itself.
var readOnlyCategories = []string{"calculated", "global"}

// attribute is one of the account's contact attributes.
type attribute struct {
	category string
	typ      string // text, date, float, boolean, id; empty for some categories
	options  []option
}

// hasOptions reports whether a's values are options: a category attribute
// listed with them (typeValues sends an option's number; one listed
// without them is sent as mapped).
func (a attribute) hasOptions() bool {
	return a.category == categoryCategory && len(a.options) > 0
}

// option is one of a category attribute's values: Brevo keeps a contact's
// value of such an attribute as the option's number ("ID of Value of the
// category type attribute", getAttributes_enumeration in swagger.yaml).
type option struct {
	Value int64  `json:"value"`
	Label string `json:"label"`
}

// attrType is how a mapped attribute's values are sent (typeValues): its
// type, and for a category attribute its options.
type attrType struct {
	typ     string // date, float, boolean, text, category
	options []option
}

// accountAttributes reads the account's attributes by upper-case name.
// listed is false when the list could not be had in Brevo's shape (a
// Brevo-compatible server without the endpoint): nothing can be checked.
func (d *Destination) accountAttributes(ctx context.Context) (attrs map[string]attribute, listed bool, err error) {
	resp, err := d.do(ctx, request{method: http.MethodGet, path: "/contacts/attributes", route: attributesRoute})
	var ae *APIError
	switch {
	case err == nil:
	case failure.CodeOf(err) != failure.Internal:
		return nil, false, err // auth, unavailable, rate limited: as for any call
	case errors.As(err, &ae):
		return nil, false, nil // not there (404, 405...): nothing to check against
	default:
		return nil, false, err
	}
	var body struct {
		Attributes *[]struct {
			Name        string   `json:"name"`
			Category    string   `json:"category"`
			Type        string   `json:"type"`
			Enumeration []option `json:"enumeration"`
		} `json:"attributes"`
	}
	if json.Unmarshal(resp.body, &body) != nil || body.Attributes == nil {
		return nil, false, nil
	}
	attrs = make(map[string]attribute, len(*body.Attributes))
	for _, a := range *body.Attributes {
		attrs[strings.ToUpper(a.Name)] = attribute{category: a.Category, typ: a.Type, options: a.Enumeration}
	}
	return attrs, true, nil
}

// attributeProblem is the failure for the mapped attributes that the
// account's attributes lack (every one named), else for the first that
// Brevo computes itself; nil if none.
func (d *Destination) attributeProblem(attrs map[string]attribute) error {
	var missing []string
	for _, name := range d.attrs {
		if _, ok := attrs[strings.ToUpper(name)]; !ok {
			missing = append(missing, name)
		}
	}
	hint := localNameHint(missing, attrs)
	switch len(missing) {
	case 0:
	case 1:
		return failure.New(failure.InvalidSyncDefinition, fmt.Sprintf(
			"brevo: attribute %s does not exist in this account, and Brevo drops the values of attributes it does not have without an error: "+
				"create it (Brevo: Contacts > Settings > Contact attributes) or fix mapping.attributes%s", missing[0], hint))
	default:
		return failure.New(failure.InvalidSyncDefinition, fmt.Sprintf(
			"brevo: attributes %s do not exist in this account, and Brevo drops the values of attributes it does not have without an error: "+
				"create them (Brevo: Contacts > Settings > Contact attributes) or fix mapping.attributes%s", strings.Join(missing, ", "), hint))
	}
	for _, name := range d.attrs {
		a := attrs[strings.ToUpper(name)]
		switch {
		case slices.Contains(readOnlyCategories, a.category):
			return failure.New(failure.InvalidSyncDefinition, fmt.Sprintf(
				"brevo: attribute %s is a %s attribute, which Brevo computes itself: remove it from mapping.attributes", name, a.category))
		}
	}
	return nil
}

// localNames are the names Brevo gives an account's first- and last-name
// attributes in the language the account was created in ("The FIRSTNAME
// and LASTNAME default attributes name may vary based on the account
// language", Brevo's help on import files): French, German, Spanish,
// Italian, Portuguese.
var localNames = map[string][]string{
	"FIRSTNAME": {"PRENOM", "VORNAME", "NOMBRE", "NOME"},
	"LASTNAME":  {"NOM", "NACHNAME", "APELLIDOS", "COGNOME", "SOBRENOME"},
}

// localNameHint names, for a missing FIRSTNAME or LASTNAME, the account's
// attribute of another language that holds it; "" when there is none.
func localNameHint(missing []string, attrs map[string]attribute) string {
	var found []string
	for _, m := range missing {
		for _, n := range localNames[strings.ToUpper(m)] {
			if _, ok := attrs[n]; ok {
				found = append(found, n+" for "+strings.ToUpper(m))
				break
			}
		}
	}
	if len(found) == 0 {
		return ""
	}
	return " (this account names them in the language it was created in: map " + strings.Join(found, ", ") + ")"
}

// typedAttributes are the mapped attributes whose values Brevo drops unless
// they are of a type (typedValue) or one of a category attribute's options
// (categoryValue), the text attributes, whose numbers and booleans are sent
// as text (textValue), and every other mapped attribute (an id or
// multiple-choice attribute, a category one listed without options: its
// values are sent as mapped, but an emptied one as null, since it is not
// text: typeValues), by name as mapped (as records carry them); nil when
// none of the account's is mapped.
func (d *Destination) typedAttributes(attrs map[string]attribute) map[string]attrType {
	var out map[string]attrType
	for _, name := range d.attrs {
		a, listed := attrs[strings.ToUpper(name)]
		if !listed {
			continue // not the account's (or no listing): sent as mapped, "" as ""
		}
		t := attrType{typ: a.typ}
		switch {
		case a.hasOptions():
			// Listed with type text (swagger.yaml's example) or category
			// (createAttribute's type): its options decide either way.
			t = attrType{typ: categoryCategory, options: a.options}
		case a.category == categoryCategory && a.typ == categoryCategory:
			// Listed without options: sent as mapped, as a listing that
			// left them out would otherwise refuse every record.
			t.typ = asMapped
		}
		if out == nil {
			out = make(map[string]attrType)
		}
		out[name] = t
	}
	return out
}

// asMapped is the attrType.typ of a category attribute listed without
// options: its values are sent as mapped, but for an emptied one
// (typeValues).
const asMapped = ""

// categoryCategory is the category (and the type) of an attribute whose
// values are options (attribute.options).
const categoryCategory = "category"

// ensureAttributes checks the mapped attributes once per destination,
// before its first write, and returns typedAttributes. A refused key fails
// the write at once; a list it cannot read for another reason (a transient
// failure) is tried again at the next write, and the writes themselves meet
// whatever made it fail.
func (d *Destination) ensureAttributes(ctx context.Context) (map[string]attrType, error) {
	if len(d.attrs) == 0 {
		return nil, nil
	}
	d.attrMu.Lock()
	defer d.attrMu.Unlock()
	if d.attrChecked {
		return d.attrTypes, d.attrErr
	}
	attrs, listed, err := d.accountAttributes(apiclient.Unplaced(ctx)) // under attrMu
	if failure.CodeOf(err) == failure.DestinationAuth {
		// The key is refused: the writes would be too (every page's).
		d.attrChecked, d.attrErr = true, err
		return nil, err
	}
	if err != nil {
		return nil, nil
	}
	d.attrChecked = true
	if listed {
		d.attrErr = d.attributeProblem(attrs)
		d.attrTypes = d.typedAttributes(attrs)
	}
	return d.attrTypes, d.attrErr
}

// Brevo also drops, without an error, a value that does not match its
// attribute's type ("Values that don't match the attribute type (e.g. text
// or string in a date attribute) will be ignored", createContact in
// swagger.yaml). So a value of a date, float or boolean attribute is sent
// in the type's JSON form when it has one unambiguously (a numeric string as
// a number, "true" or 1 as true), and a record whose value has none is
// rejected, with a message naming the attribute and never the value
// (docs/guide.md#brevo-attributes).

// typeValues converts c's values of the typed attributes types (by name as
// mapped) and reports the first that cannot be converted: c is then
// rejected.
func typeValues(c *contact, types map[string]attrType) string {
	var out map[string]any
	for k, v := range c.attrs {
		at, ok := types[k]
		if !ok || v == nil {
			continue // untyped, or a cleared value sent as null
		}
		typ := at.typ
		if typ == "text" {
			if tv, ok := textValue(v); ok {
				if out == nil {
					out = maps.Clone(c.attrs)
				}
				out[k] = tv
			}
			continue
		}
		if v == "" {
			// A cleared value: "" is text, which Brevo ignores in an
			// attribute of another type (a date, a list of options...),
			// leaving the old value; null erases it. (An import erases ""
			// anyway: emptyContactsAttributes.)
			if out == nil {
				out = maps.Clone(c.attrs)
			}
			out[k] = nil
			continue
		}
		var tv any
		switch typ {
		case categoryCategory:
			tv, ok = categoryValue(at.options, v)
		case "date", "float", "boolean":
			tv, ok = typedValue(typ, v)
		default:
			continue // sent as mapped (typedAttributes)
		}
		if !ok {
			hint, wants := "", typeWants[typ]
			if s, isText := v.(string); isText && typ == "float" && decimalComma(strings.TrimSpace(s)) {
				hint = " (it has a comma: numbers are written with a decimal point and no thousands separator, 1.5 or 1500; convert the column in the source or its query)"
			}
			if typ == categoryCategory {
				// The options are the account's, not the record's: naming
				// them tells a person what to map without showing the value.
				wants = "one of its options, by label or number (" + optionList(at.options) + ")"
			}
			return fmt.Sprintf("attribute %s is a %s attribute in Brevo and this record's value is not %s%s: Brevo would drop it without an error",
				strings.ToUpper(k), typ, wants, hint)
		}
		if tv != v {
			if out == nil {
				out = maps.Clone(c.attrs)
			}
			out[k] = tv
		}
	}
	if out != nil {
		c.attrs = out
		return c.encode()
	}
	return ""
}

// textValue is a number, boolean, object or array v as the text a text
// attribute keeps (an object or array as its JSON); ok is false for a
// string or null, sent as mapped. Brevo keeps a JSON number as a double:
// an id above 2^53 (a bigint key) sent as one lost its last digits, where
// its text keeps them all. And it ignores a value that does not match its
// attribute's type (swagger.yaml, createContact): a JSON column's object
// is not text.
func textValue(v any) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	case int:
		return strconv.Itoa(x), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case float64, float32, map[string]any, []any:
		b, err := json.Marshal(x)
		return string(b), err == nil
	}
	return "", false
}

// typeWants says what a value of each typed attribute must be.
var typeWants = map[string]string{
	"date":    "a date written YYYY-MM-DD",
	"float":   "a number",
	"boolean": "true or false (or 1 or 0)",
}

// typedValue is v as Brevo keeps it in an attribute of type typ, and false
// when v has no such form.
func typedValue(typ string, v any) (any, bool) {
	switch typ {
	case "date":
		s, ok := v.(string)
		if !ok || len(s) != len(dateLayout) {
			return nil, false
		}
		_, err := time.Parse(dateLayout, s)
		return v, err == nil
	case "float":
		switch x := v.(type) {
		case float64, float32, int, int32, int64, uint, uint32, uint64:
			return v, true
		case json.Number:
			// Brevo keeps a double: 1E400 has none (an independent
			// check's stand-in read it as Infinity).
			return v, finiteNumber(x.String())
		case string:
			if n := strings.TrimSpace(x); validNumber(n) && finiteNumber(n) {
				return json.Number(n), true
			}
		}
		return nil, false
	case "boolean":
		switch x := v.(type) {
		case bool:
			return v, true
		case string:
			switch strings.ToLower(strings.TrimSpace(x)) {
			case "true", "1":
				return true, true
			case "false", "0":
				return false, true
			}
		case json.Number:
			return numberBool(x.String())
		case float64, int, int64:
			return numberBool(fmt.Sprint(x))
		}
		return nil, false
	}
	return v, true
}

// categoryValue is v as Brevo keeps it in a category attribute with
// options opts: the number of the option v names by its label (exactly, or
// else without case when only one label matches) or by its number; false
// when v names none. Brevo documents the number as what a contact holds
// (getAttributes_enumeration: "ID of Value"), and ignores a value not of
// the attribute's type, so a label sent as it is could be dropped without
// an error.
func categoryValue(opts []option, v any) (any, bool) {
	has := func(n int64) bool {
		return slices.ContainsFunc(opts, func(o option) bool { return o.Value == n })
	}
	var num string
	switch x := v.(type) {
	case string:
		t := strings.TrimSpace(x)
		found, n := int64(0), 0
		for _, o := range opts {
			if o.Label == t {
				return o.Value, true
			}
			if strings.EqualFold(o.Label, t) {
				found, n = o.Value, n+1
			}
		}
		if n == 1 {
			return found, true
		}
		num = t
	case json.Number:
		num = x.String()
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		num = fmt.Sprint(x) // a source's integer column
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return nil, false
		}
		num = strconv.FormatInt(int64(x), 10)
	default:
		return nil, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || !has(n) {
		return nil, false
	}
	return n, true
}

// optionList names a category attribute's options for a message: at most
// the first ten, each "label (number)".
func optionList(opts []option) string {
	var parts []string
	for i, o := range opts {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(opts)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", o.Label, o.Value))
	}
	return strings.Join(parts, ", ")
}

// finiteNumber reports whether JSON number n is within a double's range,
// the form Brevo keeps a float attribute in.
func finiteNumber(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	return err == nil && !math.IsInf(f, 0)
}

// decimalComma reports whether s is a number written with a decimal comma
// (1,5 or -12,75), as a spreadsheet in many locales exports it.
func decimalComma(s string) bool {
	whole, frac, ok := strings.Cut(s, ",")
	return ok && frac != "" && !strings.ContainsAny(frac, ",.") && validNumber(whole+"."+frac)
}

// numberBool reads 1 and 0 as booleans: how MySQL and others store them.
func numberBool(n string) (any, bool) {
	switch n {
	case "1":
		return true, true
	case "0":
		return false, true
	}
	return nil, false
}

// dateLayout is how Brevo's API writes a date attribute's value.
const dateLayout = "2006-01-02"
