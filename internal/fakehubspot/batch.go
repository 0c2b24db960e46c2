package fakehubspot

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Request bodies, as HubSpot's batch reference documents them. Pointers
// tell a missing field from an empty one.
type (
	upsertInput struct {
		ID                 *string           `json:"id"`
		IDProperty         *string           `json:"idProperty"`
		Properties         map[string]string `json:"properties"`
		ObjectWriteTraceID *string           `json:"objectWriteTraceId"`
	}
	createInput struct {
		Properties         map[string]string `json:"properties"`
		Associations       []map[string]any  `json:"associations"`
		ObjectWriteTraceID *string           `json:"objectWriteTraceId"`
	}
	idInput struct {
		ID *string `json:"id"`
	}
	upsertBody struct {
		Inputs *[]upsertInput `json:"inputs"`
	}
	createBody struct {
		Inputs *[]createInput `json:"inputs"`
	}
	archiveBody struct {
		Inputs *[]idInput `json:"inputs"`
	}
	readBody struct {
		Inputs                *[]idInput `json:"inputs"`
		Properties            []string   `json:"properties"`
		PropertiesWithHistory []string   `json:"propertiesWithHistory"`
		IDProperty            *string    `json:"idProperty"`
	}
)

// batchError is one entry of a 207's errors[].
type batchError struct {
	Status   string         `json:"status"`
	Category string         `json:"category"`
	Message  string         `json:"message"`
	Context  map[string]any `json:"context,omitempty"`
}

func (s *Server) batch(w http.ResponseWriter, r *http.Request, op string) {
	switch op {
	case "upsert":
		var b upsertBody
		if s.decode(w, r, &b) && s.checkInputs(w, b.Inputs == nil, lenOf(b.Inputs)) {
			s.upsert(w, r, *b.Inputs, false)
		}
	case "update":
		var b upsertBody
		if s.decode(w, r, &b) && s.checkInputs(w, b.Inputs == nil, lenOf(b.Inputs)) {
			s.upsert(w, r, *b.Inputs, true)
		}
	case "create":
		var b createBody
		if s.decode(w, r, &b) && s.checkInputs(w, b.Inputs == nil, lenOf(b.Inputs)) {
			s.createBatch(w, r, *b.Inputs)
		}
	case "archive":
		var b archiveBody
		if s.decode(w, r, &b) && s.checkInputs(w, b.Inputs == nil, lenOf(b.Inputs)) {
			s.archive(w, r, *b.Inputs)
		}
	case "read":
		var b readBody
		if s.decode(w, r, &b) && s.checkInputs(w, b.Inputs == nil, lenOf(b.Inputs)) {
			s.read(w, r, b)
		}
	default:
		s.error(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "Unable to route POST "+r.URL.Path, nil)
	}
}

func lenOf[T any](p *[]T) int {
	if p == nil {
		return 0
	}
	return len(*p)
}

func (s *Server) checkInputs(w http.ResponseWriter, missing bool, n int) bool {
	switch {
	case missing:
		s.badRequest(w, "Invalid input JSON: inputs is required", map[string]any{"missingFields": []string{"inputs"}})
		return false
	case n > MaxBatch:
		s.badRequest(w, fmt.Sprintf("Batch input size exceeds the limit of %d. Got %d inputs.", MaxBatch, n), nil)
		return false
	}
	return true
}

// idProperty checks a batch's idProperty: email or a property with unique
// values (hs_object_id when empty, for update and read).
func (s *Server) idProperty(p *string, required bool) (string, string) {
	if p == nil || *p == "" {
		if required {
			return "", "idProperty is required"
		}
		return "hs_object_id", ""
	}
	name := *p
	if name == "email" {
		return name, ""
	}
	prop, ok := s.props[name]
	switch {
	case !ok:
		return "", fmt.Sprintf("Property %q does not exist", name)
	case !prop.Unique:
		return "", fmt.Sprintf("Property %q is not a unique identifier property; idProperty must have hasUniqueValue", name)
	}
	return name, ""
}

// checkProps returns the per-input problem with props (category and
// message), or "" when they are valid. Unknown properties are reported
// separately (unknown) as they fail the whole batch.
func (s *Server) checkProps(props map[string]string) (category, msg string, unknown []string) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p, ok := s.props[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		if p.ReadOnly {
			return "VALIDATION_ERROR", fmt.Sprintf("Property values were not valid: %q is a read only property; its value cannot be set", k), nil
		}
		if m := s.checkValue(p, props[k]); m != "" && category == "" {
			category, msg = "VALIDATION_ERROR", "Property values were not valid: "+m
		}
	}
	return category, msg, unknown
}

// surroundingSpace returns the first property of props, by name, that is
// not a text property (type string) and whose value, or one of whose
// ";"-separated options for an enumeration, begins or ends with white
// space or an invisible character ("" when none). HubSpot's changelog
// "Breaking Change: Enhanced Validations for Non-String Properties in
// HubSpot's CRMObject APIs" (in force since 2025-04-07): "Non-string
// property values, including enumeration options and multi-value
// enumeration properties, must not contain leading or trailing whitespace
// or invisible unicode characters. Values with these characters will
// result in a 400 Bad Request error with a VALIDATION_ERROR category"
// (error LEADING_TRAILING_WHITESPACE). The fake refuses the whole batch
// with 400, as that page says, never one input in a 207. Which characters
// are "invisible" is not documented: the fake takes Unicode white space
// (no-break spaces among them) and format characters (zero-width space,
// byte order mark).
func (s *Server) surroundingSpace(props map[string]string) (name, value string) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p, ok := s.props[k]
		v := props[k]
		if !ok || p.Type == "string" || v == "" {
			continue
		}
		parts := []string{v}
		if p.Type == "enumeration" {
			parts = strings.Split(v, ";")
		}
		for _, x := range parts {
			if x != strings.TrimFunc(x, blank) {
				return k, v
			}
		}
	}
	return "", ""
}

// blank reports whether r is white space or an invisible (format)
// character, as HubSpot refuses at either end of a non-string value
// (surroundingSpace).
func blank(r rune) bool { return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) }

// whitespaceError is HubSpot's message for a value surroundingSpace finds
// (the changelog's example).
func whitespaceError(name, value string) string {
	detail, _ := json.Marshal([]map[string]any{{"isValid": false, "message": strconv.Quote(value) + " includes leading or trailing whitespace.",
		"error": "LEADING_TRAILING_WHITESPACE", "name": name}})
	return "Property values were not valid: " + string(detail)
}

// decimalRE is a number HubSpot takes. Its changelog "Upcoming: A change
// for number properties in CRM APIs": number property values "contain only
// numeric digits, an optional single negative sign ("-"), and an optional
// single decimal point represented by a period/dot symbol"; others are
// "rejected with an HTTP 400 response code". So no exponent ("1e-05"), no
// "+" sign, no NaN, Inf or hex (which strconv.ParseFloat would take). The
// fake refuses such a value per input (207), as its other invalid values.
var decimalRE = regexp.MustCompile(`^-?(\d+\.?\d*|\.\d+)$`)

var emailRE = regexp.MustCompile(`^[^\s@"<>(),;:\\\[\]]+@[^\s@"<>(),;:\\\[\]]+\.[^\s@"<>(),;:\\\[\]]+$`)

func (s *Server) checkValue(p Property, v string) string {
	if v == "" {
		return "" // clears the value
	}
	if n := utf8.RuneCountInString(v); n > MaxValueChars {
		return fmt.Sprintf("the value of property %s is %d characters long, more than the %d allowed", p.Name, n, MaxValueChars)
	}
	switch p.Type {
	case "number":
		if !decimalRE.MatchString(v) {
			return fmt.Sprintf("%q was not a valid number for property %s", v, p.Name)
		}
	case "bool":
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return fmt.Sprintf("%q was not a valid boolean for property %s", v, p.Name)
		}
	case "date", "datetime":
		t, ok := parseTime(v)
		switch {
		case !ok:
			return fmt.Sprintf("%q was not a valid date for property %s", v, p.Name)
		case p.Type == "date" && !t.UTC().Equal(t.UTC().Truncate(24*time.Hour)):
			// HubSpot's timestamps FAQ: date properties "must be set to
			// midnight UTC ... If you try to set a value that is not
			// midnight UTC, you will receive an error."
			return fmt.Sprintf("%q is not midnight UTC, as a value of date property %s must be", v, p.Name)
		}
	case "enumeration":
		if len(p.Options) == 0 {
			break
		}
		for _, o := range strings.Split(v, ";") {
			if !slices.Contains(p.Options, o) {
				return fmt.Sprintf("%s was not one of the allowed options for property %s", o, p.Name)
			}
		}
	}
	if p.Name == "email" {
		return s.checkEmail(v)
	}
	return ""
}

func (s *Server) checkEmail(v string) string {
	if !emailRE.MatchString(strings.TrimSpace(v)) || slices.ContainsFunc(s.o.RefuseEmails, func(e string) bool { return strings.EqualFold(e, v) }) {
		return fmt.Sprintf("Email address %s is invalid", v)
	}
	return ""
}

func (s *Server) beforeWrite(r *http.Request) {
	if s.o.WriteLatency > 0 {
		time.Sleep(s.o.WriteLatency)
	}
	if s.o.BeforeWrite != nil {
		s.o.BeforeWrite(r)
	}
}

// afterWrite runs the hook and cuts the connection of the writes whose
// answer is to be lost (after they were applied).
func (s *Server) afterWrite(r *http.Request) {
	if s.o.AfterWrite != nil {
		s.o.AfterWrite(r)
	}
	s.mu.Lock()
	s.writes++
	drop := s.writes <= s.o.DropFirst || (s.o.DropResponseRate > 0 && s.rng.Float64() < s.o.DropResponseRate)
	if drop {
		s.stats.Dropped++
	}
	s.mu.Unlock()
	if drop {
		panic(http.ErrAbortHandler) // net/http closes the connection without an answer
	}
}

func (s *Server) objectJSON(c *Contact, props []string, isNew *bool) map[string]any {
	out := map[string]any{
		"id": c.ID, "createdAt": c.Created.Format(time.RFC3339Nano), "updatedAt": c.Updated.Format(time.RFC3339Nano),
		"archived": c.Archived,
	}
	p := map[string]any{}
	if props == nil {
		for k, v := range c.Properties {
			p[k] = v
		}
	} else {
		for _, k := range append(props, "hs_object_id") {
			if v, ok := c.Properties[k]; ok {
				p[k] = v
			} else if _, known := s.props[k]; known {
				p[k] = nil
			}
		}
	}
	p["createdate"] = c.Created.Format(time.RFC3339Nano)
	p["lastmodifieddate"] = c.Updated.Format(time.RFC3339Nano)
	out["properties"] = p
	if isNew != nil {
		out["new"] = *isNew
	}
	return out
}

func (s *Server) batchAnswer(w http.ResponseWriter, ok int, results []map[string]any, errs []batchError) {
	now := s.clk.Now().UTC().Format(time.RFC3339Nano)
	body := map[string]any{"status": "COMPLETE", "results": results, "startedAt": now, "completedAt": now}
	if results == nil {
		body["results"] = []any{}
	}
	status := ok
	if len(errs) > 0 {
		status = http.StatusMultiStatus
		body["errors"] = errs
		body["numErrors"] = len(errs)
		s.mu.Lock()
		s.stats.Rejected += int64(len(errs))
		s.mu.Unlock()
	}
	writeJSON(w, status, body)
}

// upsert serves batch/upsert and (update) batch/update.
func (s *Server) upsert(w http.ResponseWriter, r *http.Request, in []upsertInput, update bool) {
	type item struct {
		prop, id string
		props    map[string]string
	}
	items := make([]item, len(in))
	seen := map[string]bool{}
	var unknown []string
	for i, x := range in {
		if x.ID == nil || *x.ID == "" {
			s.badRequest(w, fmt.Sprintf("inputs[%d].id is required", i), nil)
			return
		}
		prop, msg := s.idProperty(x.IDProperty, !update)
		if msg != "" {
			s.badRequest(w, msg, nil)
			return
		}
		id := *x.ID
		key := prop + "\x00" + normalize(prop, id)
		if seen[key] {
			s.badRequest(w, "Duplicate IDs found in batch input: ["+id+"]. IDs must be unique", map[string]any{"ids": []string{id}})
			return
		}
		seen[key] = true
		_, _, u := s.checkProps(x.Properties)
		unknown = append(unknown, u...)
		if k, v := s.surroundingSpace(x.Properties); k != "" {
			s.badRequest(w, whitespaceError(k, v), nil)
			return
		}
		items[i] = item{prop: prop, id: id, props: x.Properties}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		unknown = slices.Compact(unknown)
		s.badRequest(w, fmt.Sprintf("Property values were not valid: Property %q does not exist", unknown[0]),
			map[string]any{"propertyName": unknown})
		return
	}
	s.beforeWrite(r)
	route := "batch/upsert"
	if update {
		route = "batch/update"
	}
	var (
		results []map[string]any
		errs    []batchError
	)
	s.mu.Lock()
	for _, it := range items {
		cat, msg, _ := s.checkProps(it.props)
		if cat == "" && it.prop == "email" {
			if m := s.checkEmail(it.id); m != "" {
				cat, msg = "VALIDATION_ERROR", m
			}
		}
		if cat == "" {
			if v, ok := it.props[it.prop]; ok && normalize(it.prop, v) != normalize(it.prop, it.id) {
				cat, msg = "VALIDATION_ERROR", fmt.Sprintf("Property %s in properties differs from the input's id %s", it.prop, it.id)
			}
		}
		if cat != "" {
			errs = append(errs, batchError{Status: "error", Category: cat, Message: msg, Context: map[string]any{"ids": []string{it.id}}})
			continue
		}
		c := s.find(it.prop, it.id)
		if update && c == nil {
			errs = append(errs, batchError{Status: "error", Category: "OBJECT_NOT_FOUND",
				Message: "Could not get some CONTACT objects, they may be deleted or not exist. Check that ids are valid.",
				Context: map[string]any{"ids": []string{it.id}}})
			continue
		}
		if em := it.props["email"]; em != "" && it.prop != "email" {
			// The e-mail is HubSpot's unique contact identifier ("email
			// address is the primary unique identifier to avoid duplicate
			// contacts"): another contact's is refused, as batch/create
			// refuses it.
			if other := s.find("email", em); other != nil && other != c {
				errs = append(errs, batchError{Status: "error", Category: "CONFLICT",
					Message: "Contact already exists. Existing ID: " + other.ID, Context: map[string]any{"ids": []string{it.id}}})
				continue
			}
		}
		props := it.props
		if c == nil && it.prop != "hs_object_id" {
			props = make(map[string]string, len(it.props)+1)
			for k, v := range it.props {
				props[k] = v
			}
			props[it.prop] = it.id
		}
		c, isNew := s.write(c, props, route)
		var np *bool
		if !update {
			np = &isNew
		}
		results = append(results, s.objectJSON(c, nil, np))
	}
	s.mu.Unlock()
	s.afterWrite(r)
	s.batchAnswer(w, http.StatusOK, results, errs)
}

// createBatch serves batch/create: all or nothing.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request, in []createInput) {
	var unknown []string
	for i, x := range in {
		if len(x.Properties) == 0 {
			s.badRequest(w, fmt.Sprintf("inputs[%d].properties is required", i), nil)
			return
		}
		if k, v := s.surroundingSpace(x.Properties); k != "" {
			s.badRequest(w, whitespaceError(k, v), nil)
			return
		}
		cat, msg, u := s.checkProps(x.Properties)
		unknown = append(unknown, u...)
		if cat != "" {
			s.badRequest(w, msg, map[string]any{"index": i})
			return
		}
		if len(x.Associations) > 0 {
			s.badRequest(w, "associations are not supported by fakehubspot", nil)
			return
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		s.badRequest(w, fmt.Sprintf("Property values were not valid: Property %q does not exist", unknown[0]),
			map[string]any{"propertyName": slices.Compact(unknown)})
		return
	}
	s.beforeWrite(r)
	s.mu.Lock()
	// A value another input of the batch or a live contact already has
	// refuses the whole batch.
	seen := map[string]bool{}
	for _, x := range in {
		for k, v := range x.Properties {
			p := s.props[k]
			if (k != "email" && !p.Unique) || v == "" {
				continue
			}
			key := k + "\x00" + normalize(k, v)
			if c := s.find(k, v); c != nil || seen[key] {
				id := ""
				if c != nil {
					id = c.ID
				}
				s.mu.Unlock()
				s.error(w, http.StatusConflict, "CONFLICT", "Contact already exists. Existing ID: "+id, nil)
				return
			}
			seen[key] = true
		}
	}
	results := make([]map[string]any, 0, len(in))
	for _, x := range in {
		c, isNew := s.write(nil, x.Properties, "batch/create")
		results = append(results, s.objectJSON(c, nil, &isNew))
	}
	s.mu.Unlock()
	s.afterWrite(r)
	s.batchAnswer(w, http.StatusCreated, results, nil)
}

func (s *Server) archive(w http.ResponseWriter, r *http.Request, in []idInput) {
	for i, x := range in {
		if x.ID == nil || *x.ID == "" {
			s.badRequest(w, fmt.Sprintf("inputs[%d].id is required", i), nil)
			return
		}
	}
	s.beforeWrite(r)
	s.mu.Lock()
	for _, x := range in {
		if c := s.contacts[*x.ID]; c != nil && !c.Archived && c.MergedInto == "" {
			s.archiveContact(c)
			c.Updated = s.clk.Now().UTC()
		}
	}
	s.mu.Unlock()
	s.afterWrite(r)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) read(w http.ResponseWriter, r *http.Request, b readBody) {
	prop, msg := s.idProperty(b.IDProperty, false)
	if msg != "" {
		s.badRequest(w, msg, nil)
		return
	}
	archived := false
	if a := r.URL.Query().Get("archived"); a != "" {
		v, err := strconv.ParseBool(a)
		if err != nil {
			s.badRequest(w, "archived must be true or false", nil)
			return
		}
		archived = v
	}
	props := b.Properties
	if len(props) == 0 {
		props = []string{"email", "firstname", "lastname"}
	}
	var (
		results []map[string]any
		missing []string
	)
	s.mu.Lock()
	for i, x := range *b.Inputs {
		if x.ID == nil || *x.ID == "" {
			s.mu.Unlock()
			s.badRequest(w, fmt.Sprintf("inputs[%d].id is required", i), nil)
			return
		}
		var c *Contact
		if archived {
			for _, a := range s.contacts {
				if a.Archived && a.MergedInto == "" && (a.ID == *x.ID || (prop != "hs_object_id" && a.Properties[prop] == normalize(prop, *x.ID))) {
					c = a
				}
			}
		} else {
			c = s.find(prop, *x.ID)
		}
		if c == nil {
			missing = append(missing, *x.ID)
			continue
		}
		results = append(results, s.objectJSON(c, props, nil))
	}
	s.mu.Unlock()
	var errs []batchError
	if len(missing) > 0 {
		errs = []batchError{{Status: "error", Category: "OBJECT_NOT_FOUND",
			Message: "Could not get some CONTACT objects, they may be deleted or not exist. Check that ids are valid.",
			Context: map[string]any{"ids": missing}}}
		s.mu.Lock()
		s.stats.Rejected -= int64(len(errs)) // a read refuses nothing
		s.mu.Unlock()
	}
	s.batchAnswer(w, http.StatusOK, results, errs)
}

// merge serves POST /crm/v3/objects/contacts/merge.
func (s *Server) merge(w http.ResponseWriter, r *http.Request) {
	var b struct {
		PrimaryObjectID *string `json:"primaryObjectId"`
		ObjectIDToMerge *string `json:"objectIdToMerge"`
	}
	if !s.decode(w, r, &b) {
		return
	}
	if b.PrimaryObjectID == nil || b.ObjectIDToMerge == nil {
		s.badRequest(w, "primaryObjectId and objectIdToMerge are required", nil)
		return
	}
	id, err := s.Merge(*b.PrimaryObjectID, *b.ObjectIDToMerge)
	if err != nil {
		s.badRequest(w, err.Error(), nil)
		return
	}
	s.mu.Lock()
	out := s.objectJSON(s.contacts[id], nil, nil)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}
