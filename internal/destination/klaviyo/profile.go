package klaviyo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/destination"
)

// ScalarAttributes are the profile attributes Klaviyo's spec gives as
// strings, mapped by their own name (email is mapping.email).
var ScalarAttributes = []string{"first_name", "last_name", "phone_number", "external_id", "organization", "locale", "title", "image"}

// LocationAttributes are the fields of a profile's location, mapped as
// location.NAME.
var LocationAttributes = []string{"address1", "address2", "city", "country", "region", "zip", "timezone", "ip", "latitude", "longitude"}

// AttributeProblem says what is wrong with a mapped attribute name, or "":
// a name is a scalar attribute (first_name, ...), location.FIELD, or
// properties.NAME (a custom property).
func AttributeProblem(name string) string {
	switch {
	case name == "email":
		return "is mapping.email's; map the e-mail column there"
	case slices.Contains(ScalarAttributes, name):
		return ""
	case strings.HasPrefix(name, "location."):
		if !slices.Contains(LocationAttributes, strings.TrimPrefix(name, "location.")) {
			return "is not a field of a Klaviyo profile's location (" + strings.Join(LocationAttributes, ", ") + ")"
		}
		return ""
	case strings.HasPrefix(name, "properties."):
		if strings.TrimSpace(strings.TrimPrefix(name, "properties.")) == "" {
			return "needs a custom property name after properties."
		}
		return ""
	}
	return "is not a Klaviyo profile attribute (" + strings.Join(ScalarAttributes, ", ") +
		", location.FIELD, or properties.NAME for a custom property)"
}

// profile is a record's data read for Klaviyo.
type profile struct {
	email string
	// attrs is the JSON:API attributes object every path sends: email, the
	// scalar attributes, location{} and properties{}.
	attrs map[string]any
	// flat is the mapped attributes by mapped name, as sent (for Verify).
	flat map[string]any
	// invalid, when set, is why the record is rejected without a request.
	invalid string
}

// parseRecord reads a mapped record: {"email": string, "attributes": {name: value}}.
func parseRecord(r destination.Record) profile {
	var p profile
	switch v := r.Data["email"].(type) {
	case string:
		p.email = strings.TrimSpace(v)
	case nil:
	default:
		p.invalid = "email must be a string"
		return p
	}
	if p.email == "" {
		p.invalid = "record has no email"
		return p
	}
	if !plausibleEmail(p.email) {
		p.invalid = "invalid email address" + destination.RefusedBeforeSending
		return p
	}
	p.attrs = map[string]any{"email": p.email}
	p.flat = map[string]any{}
	var in map[string]any
	switch v := r.Data["attributes"].(type) {
	case nil:
	case map[string]any:
		in = v
	default:
		p.invalid = "attributes must be an object"
		return p
	}
	loc, props := map[string]any{}, map[string]any{}
	for name, v := range in {
		if prob := AttributeProblem(name); prob != "" {
			p.invalid = "attribute " + strconv.Quote(name) + " " + prob
			return p
		}
		if v == "" {
			// An empty value clears the field: Klaviyo's way is null
			// (docs/guide.md#a-value-cleared-in-the-source). "" is a
			// value there: an external_id of "" is one identifier every
			// such row would share, and "" is no E.164 phone number.
			v = nil
		}
		switch {
		case strings.HasPrefix(name, "properties."):
			props[strings.TrimPrefix(name, "properties.")] = v
			p.flat[name] = v
		case strings.HasPrefix(name, "location."):
			f := strings.TrimPrefix(name, "location.")
			val, ok := v, true
			if f != "latitude" && f != "longitude" {
				val, ok = asString(v)
			} else if _, isStr := v.(string); !isStr && v != nil && !isNumber(v) {
				ok = false
			}
			if !ok {
				p.invalid = "attribute " + strconv.Quote(name) + " must be a string or a number"
				return p
			}
			loc[f] = val
			p.flat[name] = val
		default:
			val, ok := asString(v)
			if !ok {
				p.invalid = "attribute " + strconv.Quote(name) + " must be a string, a number or a boolean"
				return p
			}
			p.attrs[name] = val
			p.flat[name] = val
		}
	}
	if len(loc) > 0 {
		p.attrs["location"] = loc
	}
	if len(props) > 0 {
		p.attrs["properties"] = props
	}
	b, err := json.Marshal(p.attrs)
	if err != nil {
		p.invalid = "attributes cannot be encoded as JSON"
		return p
	}
	if len(b) > maxProfileBytes {
		p.invalid = "profile is larger than Klaviyo's 100 KB per profile"
	}
	return p
}

func isNumber(v any) bool {
	switch v.(type) {
	case float64, float32, int, int32, int64, uint, uint32, uint64, json.Number:
		return true
	}
	return false
}

// asString is a scalar attribute's value as the spec's string (nil stays
// nil: Klaviyo clears the field).
func asString(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case json.Number:
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case float32, int, int32, int64, uint, uint32, uint64:
		return fmt.Sprint(x), true
	}
	return nil, false
}

// plausibleEmail is a loose syntax check; Klaviyo stays the judge.
func plausibleEmail(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || at != strings.LastIndexByte(s, '@') || at == len(s)-1 {
		return false
	}
	return !strings.ContainsAny(s, " \t\r\n<>\",;()[]\\")
}

// empties says whether p clears a field (a mapped null or "").
func (p profile) empties() bool {
	for _, v := range p.flat {
		if empty(v) {
			return true
		}
	}
	return false
}

// clearing is the profile import that clears the fields p empties and f,
// the profile Klaviyo holds, has a value for: its e-mail and those fields
// as null (false when there is none).
func (p profile) clearing(f found) (profile, bool) {
	c := profile{email: p.email, attrs: map[string]any{"email": p.email}, flat: map[string]any{}}
	for name, v := range p.flat {
		if !empty(v) || empty(f.value(name)) {
			continue
		}
		c.flat[name] = nil
		nested, field, ok := strings.Cut(name, ".")
		if !ok {
			c.attrs[name] = nil
			continue
		}
		m, _ := c.attrs[nested].(map[string]any)
		if m == nil {
			m = map[string]any{}
			c.attrs[nested] = m
		}
		m[field] = nil
	}
	return c, len(c.flat) > 0
}

// resource is a profile as a JSON:API resource object.
func (p profile) resource() map[string]any {
	return map[string]any{"type": "profile", "attributes": p.attrs}
}
