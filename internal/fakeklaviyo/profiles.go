package fakeklaviyo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scalarFields are the profile attributes the spec gives as nullable
// strings (besides location and properties).
var scalarFields = []string{"email", "phone_number", "external_id", "first_name", "last_name", "organization",
	"locale", "title", "image"}

type state struct {
	next      int64
	profiles  []*profile // creation order
	byID      map[string]*profile
	byEmail   map[string]*profile
	byExtID   map[string]*profile
	byPhone   map[string]*profile
	jobs      map[string]*job
	jobOrder  []*job
	scheduled []*job     // not applied yet
	unsubs    []unsubJob // unsubscribe jobs not applied yet, in order
}

func newState() *state {
	return &state{byID: map[string]*profile{}, byEmail: map[string]*profile{}, byExtID: map[string]*profile{},
		byPhone: map[string]*profile{}, jobs: map[string]*job{}}
}

// newID returns a 26-character id in the shape of Klaviyo's (ULID-like).
func (st *state) newID(prefix string) string {
	st.next++
	return fmt.Sprintf("01%s%0*d", prefix, 24-len(prefix), st.next)
}

type profile struct {
	id       string
	attrs    map[string]any // scalar fields, strings
	location map[string]any
	props    map[string]any
	lists    map[string]bool
	unsubbed bool // email marketing consent UNSUBSCRIBED
	created  time.Time
	updated  time.Time
}

// Profile is a stored profile, as tests read it.
type Profile struct {
	ID           string
	Email        string
	Attributes   map[string]any // scalar fields set (first_name, external_id, ...)
	Location     map[string]any
	Properties   map[string]any
	Lists        []string // sorted
	Unsubscribed bool
	Updated      time.Time
}

func (p *profile) export() Profile {
	out := Profile{ID: p.id, Attributes: cloneMap(p.attrs), Location: cloneMap(p.location), Properties: cloneMap(p.props),
		Unsubscribed: p.unsubbed, Updated: p.updated}
	out.Email, _ = p.attrs["email"].(string)
	for l := range p.lists {
		out.Lists = append(out.Lists, l)
	}
	slices.Sort(out.Lists)
	return out
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Profile returns the profile stored for email (case-insensitive).
func (s *Server) Profile(email string) (Profile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(s.clock.Now())
	p, ok := s.st.byEmail[normEmail(email)]
	if !ok {
		return Profile{}, false
	}
	return p.export(), true
}

// Profiles returns every stored profile, in creation order.
func (s *Server) Profiles() []Profile {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(s.clock.Now())
	out := make([]Profile, len(s.st.profiles))
	for i, p := range s.st.profiles {
		out[i] = p.export()
	}
	return out
}

// AddProfile stores a profile as if written by someone else (a test's
// existing data).
func (s *Server) AddProfile(email string, attrs map[string]any, lists ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := cloneMap(attrs)
	a["email"] = email
	p := s.createLocked(a, s.clock.Now(), "test")
	for _, l := range lists {
		p.lists[l] = true
	}
	return p.id
}

func normEmail(e string) string { return strings.ToLower(strings.TrimSpace(e)) }

// validEmail accepts a bare address with a dotted domain.
func validEmail(e string) bool {
	if e == "" || len(e) > 254 || strings.ContainsAny(e, " \t\r\n") {
		return false
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Name != "" || a.Address != e {
		return false
	}
	d := e[strings.LastIndexByte(e, '@')+1:]
	return strings.Contains(d, ".") && !strings.HasPrefix(d, ".") && !strings.HasSuffix(d, ".")
}

// resource is one JSON:API resource object of a request body.
type resource struct {
	Type       string         `json:"type"`
	ID         *string        `json:"id"`
	Attributes map[string]any `json:"attributes"`
}

func decodeResource(body []byte) (resource, error) {
	var doc struct {
		Data *resource `json:"data"`
	}
	if err := decodeNumbers(body, &doc); err != nil || doc.Data == nil {
		return resource{}, fmt.Errorf("body is not a JSON:API document with data")
	}
	if doc.Data.Attributes == nil {
		doc.Data.Attributes = map[string]any{}
	}
	return *doc.Data, nil
}

// e164RE is a phone number in E.164 form: "+", then at most 15 digits, the
// first not 0.
var e164RE = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// checkAttrs returns the problem with a profile's attributes (an invalid or
// refused e-mail address, a phone number not in E.164 form, no identifier), as an error item's code, detail
// and pointer under prefix.
func (s *Server) checkAttrs(a map[string]any, prefix string) (detail, pointer string, ok bool) {
	for _, f := range scalarFields {
		if v, has := a[f]; has && v != nil {
			if _, isStr := v.(string); !isStr {
				return f + " must be a string", prefix + "/" + f, false
			}
		}
	}
	email, _ := a["email"].(string)
	if email != "" {
		n := normEmail(email)
		if !validEmail(n) || s.refuse[n] {
			return "Invalid email address", prefix + "/email", false
		}
	}
	ext, _ := a["external_id"].(string)
	phone, hasPhone := a["phone_number"].(string)
	if hasPhone && !e164RE.MatchString(phone) {
		// The spec: "Individual's phone number in E.164 format"; Klaviyo
		// refuses any other form (spaces, dashes, no "+" and country code)
		// rather than reformat it, and "" is none of them: null clears it.
		return "Invalid phone number format (Example of a valid format: +12345678901)", prefix + "/phone_number", false
	}
	if email == "" && ext == "" && phone == "" {
		return "At least one identifier (email, phone_number, external_id) is required", prefix, false
	}
	return "", "", true
}

// findLocked finds the profile a write's identifiers name: by email, else
// external_id, else phone_number. conflict is set when two identifiers name
// two different profiles.
func (s *Server) findLocked(a map[string]any) (p *profile, conflict *profile) {
	var found []*profile
	if e, _ := a["email"].(string); e != "" {
		found = append(found, s.st.byEmail[normEmail(e)])
	}
	if x, _ := a["external_id"].(string); x != "" {
		found = append(found, s.st.byExtID[x])
	}
	if ph, _ := a["phone_number"].(string); ph != "" {
		found = append(found, s.st.byPhone[ph])
	}
	for _, f := range found {
		if f == nil {
			continue
		}
		if p == nil {
			p = f
		} else if f != p {
			return p, f
		}
	}
	return p, nil
}

func (s *Server) createLocked(a map[string]any, now time.Time, via string) *profile {
	p := &profile{id: s.st.newID("P"), attrs: map[string]any{}, location: map[string]any{}, props: map[string]any{},
		lists: map[string]bool{}, created: now}
	s.st.profiles = append(s.st.profiles, p)
	s.st.byID[p.id] = p
	s.applyLocked(p, a, now)
	s.stats.ProfilesWritten++
	return p
}

// writeLocked applies a to p, counting a write that changed nothing as a
// duplicate write.
func (s *Server) writeLocked(p *profile, a map[string]any, addLists []string, now time.Time, via string) {
	changed := s.applyLocked(p, a, now)
	for _, l := range addLists {
		if !p.lists[l] {
			p.lists[l] = true
			changed = true
		}
	}
	s.stats.ProfilesWritten++
	if !changed {
		s.stats.DuplicateWrites++
		if len(s.stats.DuplicateExample) < maxDuplicateExamples {
			e, _ := p.attrs["email"].(string)
			s.stats.DuplicateExample = append(s.stats.DuplicateExample,
				fmt.Sprintf("%s by %s at %s", e, via, now.UTC().Format("15:04:05.000")))
		}
	}
}

// decodeNumbers is json.Unmarshal keeping numbers as json.Number, for
// stored (see keptNumber).
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// stored is v as Klaviyo keeps it: a custom property's integer (integers
// are one of its documented property types, "strings, integers, floats,
// dates, booleans, arrays/lists, or JSON") keeps every digit, any other
// number (a float, a location's coordinates) is a double, at any depth of
// a property's array or object too, and is answered in the double's own
// form, never the digits it was sent with: 12.50 is read back 12.5, 1e2 as
// 100, 3.0 as 3, and a decimal longer than a double holds rounded. A
// read-back that compares digits rather than values takes such a profile
// for not holding the record's values and writes it again.
func stored(v any, integers bool) any {
	switch x := v.(type) {
	case json.Number:
		if integers && !strings.ContainsAny(x.String(), ".eE") {
			return x
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = stored(e, integers)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = stored(e, integers)
		}
		return out
	}
	return v
}

// applyLocked sets a's attributes on p (null clears; absent is left alone;
// location and properties are merged key by key) and reports whether
// anything changed.
func (s *Server) applyLocked(p *profile, a map[string]any, now time.Time) bool {
	changed := false
	set := func(m map[string]any, k string, v any) {
		old, had := m[k]
		if v == nil {
			if had {
				delete(m, k)
				changed = true
			}
			return
		}
		if !had || !reflect.DeepEqual(old, v) {
			m[k] = v
			changed = true
		}
	}
	for k, v := range a {
		v = stored(v, k == "properties")
		switch k {
		case "location", "properties":
			m := p.location
			if k == "properties" {
				m = p.props
			}
			if v == nil {
				for kk := range m {
					delete(m, kk)
					changed = true
				}
				continue
			}
			if obj, ok := v.(map[string]any); ok {
				for kk, vv := range obj {
					set(m, kk, vv)
				}
			}
		case "email", "external_id", "phone_number":
			if str, ok := v.(string); ok && k == "email" {
				v = normEmail(str)
			}
			old, _ := p.attrs[k].(string)
			set(p.attrs, k, v)
			idx := map[string]map[string]*profile{"email": s.st.byEmail, "external_id": s.st.byExtID, "phone_number": s.st.byPhone}[k]
			nv, _ := p.attrs[k].(string)
			if old != nv {
				if old != "" {
					delete(idx, old)
				}
				if nv != "" {
					idx[nv] = p
				}
			}
		default:
			if slices.Contains(scalarFields, k) {
				set(p.attrs, k, v)
			}
		}
	}
	p.updated = now
	return changed
}

// profileJSON is p as the spec's profile resource object.
func (p *profile) json(base string) map[string]any {
	attrs := map[string]any{}
	for _, f := range scalarFields {
		attrs[f] = p.attrs[f] // nil: null
	}
	attrs["location"] = cloneMap(p.location)
	attrs["properties"] = cloneMap(p.props)
	attrs["created"] = p.created.UTC().Format(time.RFC3339)
	attrs["updated"] = p.updated.UTC().Format(time.RFC3339)
	return map[string]any{"type": "profile", "id": p.id, "attributes": attrs,
		"links": map[string]any{"self": base + "/api/profiles/" + p.id + "/"}}
}

func (s *Server) refused(c *call, detail, pointer string) {
	s.mu.Lock()
	s.stats.Refused++
	s.mu.Unlock()
	s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", detail, map[string]any{"pointer": pointer})
}

// profileImport: POST /api/profile-import (create_or_update_profile).
func (s *Server) profileImport(c *call) {
	res, err := decodeResource(c.body)
	if err != nil || res.Type != "profile" {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "A profile resource object is required.", map[string]any{"pointer": "/data"})
		return
	}
	if len(c.body) > maxProfileBytes {
		s.fail(c, http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large.", "The maximum allowed payload size is 100KB.", nil)
		return
	}
	if detail, ptr, ok := s.checkAttrs(res.Attributes, "/data/attributes"); !ok {
		s.refused(c, detail, ptr)
		return
	}
	s.mu.Lock()
	p, conflict := s.findLocked(res.Attributes)
	if res.ID != nil && *res.ID != "" {
		p = s.st.byID[*res.ID]
	}
	if conflict != nil {
		s.mu.Unlock()
		s.failMeta(c, http.StatusConflict, "duplicate_profile", "Conflict.",
			"A profile already exists with one of these identifiers.", map[string]any{"pointer": "/data/attributes"},
			map[string]any{"duplicate_profile_id": conflict.id})
		return
	}
	status := http.StatusOK
	if p == nil {
		p = s.createLocked(res.Attributes, c.now, "POST /api/profile-import")
		status = http.StatusCreated
	} else {
		s.writeLocked(p, res.Attributes, nil, c.now, "POST /api/profile-import")
	}
	out := p.json(c.base)
	s.mu.Unlock()
	if !s.afterWrite(c) {
		return
	}
	s.respond(c, status, map[string]any{"data": out, "links": map[string]any{"self": c.base + "/api/profile-import/"}})
}

// createProfile: POST /api/profiles (create_profile); 409 for an existing one.
func (s *Server) createProfile(c *call) {
	res, err := decodeResource(c.body)
	if err != nil || res.Type != "profile" {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "A profile resource object is required.", map[string]any{"pointer": "/data"})
		return
	}
	if detail, ptr, ok := s.checkAttrs(res.Attributes, "/data/attributes"); !ok {
		s.refused(c, detail, ptr)
		return
	}
	s.mu.Lock()
	p, conflict := s.findLocked(res.Attributes)
	if p == nil && conflict == nil {
		p = s.createLocked(res.Attributes, c.now, "POST /api/profiles")
		out := p.json(c.base)
		s.mu.Unlock()
		if !s.afterWrite(c) {
			return
		}
		s.respond(c, http.StatusCreated, map[string]any{"data": out})
		return
	}
	s.mu.Unlock()
	s.failMeta(c, http.StatusConflict, "duplicate_profile", "Conflict.", "A profile already exists with one of these identifiers.",
		map[string]any{"pointer": "/data/attributes"}, map[string]any{"duplicate_profile_id": p.id})
}

// patchProfile: PATCH /api/profiles/{id} (update_profile).
func (s *Server) patchProfile(c *call, id string) {
	res, err := decodeResource(c.body)
	if err != nil || res.Type != "profile" || res.ID == nil || *res.ID != id {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "data.id must be the profile id of the path.", map[string]any{"pointer": "/data/id"})
		return
	}
	if e, has := res.Attributes["email"]; has && e != nil {
		if str, _ := e.(string); !validEmail(normEmail(str)) || s.refuse[normEmail(str)] {
			s.refused(c, "Invalid email address", "/data/attributes/email")
			return
		}
	}
	if ph, _ := res.Attributes["phone_number"].(string); ph != "" && !e164RE.MatchString(ph) {
		s.refused(c, "Invalid phone number format (Example of a valid format: +12345678901)", "/data/attributes/phone_number")
		return
	}
	s.mu.Lock()
	p := s.st.byID[id]
	if p == nil {
		s.mu.Unlock()
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A profile with id "+id+" does not exist.", nil)
		return
	}
	if other, _ := s.findLocked(res.Attributes); other != nil && other != p {
		s.mu.Unlock()
		s.failMeta(c, http.StatusConflict, "duplicate_profile", "Conflict.", "Another profile has one of these identifiers.",
			map[string]any{"pointer": "/data/attributes"}, map[string]any{"duplicate_profile_id": other.id})
		return
	}
	s.writeLocked(p, res.Attributes, nil, c.now, "PATCH /api/profiles/{id}")
	out := p.json(c.base)
	s.mu.Unlock()
	if !s.afterWrite(c) {
		return
	}
	s.respond(c, http.StatusOK, map[string]any{"data": out})
}

func (s *Server) getProfile(c *call, id string) {
	s.mu.Lock()
	p := s.st.byID[id]
	var out map[string]any
	if p != nil {
		out = p.json(c.base)
	}
	s.mu.Unlock()
	if p == nil {
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A profile with id "+id+" does not exist.", nil)
		return
	}
	s.respond(c, http.StatusOK, map[string]any{"data": out})
}

// filterRE reads the filters the spec's GET /api/profiles allows that the
// fake supports: equals(field,"v") and any(field,["a","b"]).
var (
	equalsRE = regexp.MustCompile(`^equals\((email|external_id|phone_number|id),\s*("(?:[^"\\]|\\.)*"|'[^']*')\)$`)
	anyRE    = regexp.MustCompile(`^any\((email|external_id|phone_number|id),\s*\[(.*)\]\)$`)
	strRE    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'`)
)

func unquote(q string) string {
	if strings.HasPrefix(q, "'") {
		return strings.Trim(q, "'")
	}
	u, err := strconv.Unquote(q)
	if err != nil {
		return strings.Trim(q, `"`)
	}
	return u
}

// parseFilter returns the field and the values a filter asks for.
func parseFilter(f string) (field string, values []string, ok bool) {
	f = strings.TrimSpace(f)
	if m := equalsRE.FindStringSubmatch(f); m != nil {
		return m[1], []string{unquote(m[2])}, true
	}
	if m := anyRE.FindStringSubmatch(f); m != nil {
		for _, q := range strRE.FindAllString(m[2], -1) {
			values = append(values, unquote(q))
		}
		return m[1], values, len(values) > 0 && len(values) <= 100
	}
	return "", nil, false
}

// getProfiles: GET /api/profiles (get_profiles) with an optional filter.
func (s *Server) getProfiles(c *call) {
	q := c.r.URL.Query()
	size, offset, ok := s.page(c, defaultPageSize)
	if !ok {
		return
	}
	var field string
	var want map[string]bool
	if f := q.Get("filter"); f != "" {
		fl, vals, ok := parseFilter(f)
		if !ok {
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "The filter is not supported.", map[string]any{"parameter": "filter"})
			return
		}
		field, want = fl, map[string]bool{}
		for _, v := range vals {
			if fl == "email" {
				v = normEmail(v)
			}
			want[v] = true
		}
	}
	s.mu.Lock()
	var match []*profile
	for _, p := range s.st.profiles {
		if want != nil {
			v := p.id
			if field != "id" {
				v, _ = p.attrs[field].(string)
			}
			if !want[v] {
				continue
			}
		}
		match = append(match, p)
	}
	data := []map[string]any{}
	for i := offset; i < len(match) && i < offset+size; i++ {
		data = append(data, match[i].json(c.base))
	}
	more := offset+size < len(match)
	s.mu.Unlock()
	self := c.base + c.r.URL.RequestURI()
	links := map[string]any{"self": self}
	if more {
		nq := c.r.URL.Query()
		nq.Set("page[cursor]", strconv.Itoa(offset+size))
		links["next"] = c.base + "/api/profiles/?" + nq.Encode()
	}
	s.respond(c, http.StatusOK, map[string]any{"data": data, "links": links})
}

// profileLists: GET /api/profiles/{id}/relationships/lists.
func (s *Server) profileLists(c *call, id string) {
	s.mu.Lock()
	p := s.st.byID[id]
	var ids []string
	if p != nil {
		for l := range p.lists {
			ids = append(ids, l)
		}
	}
	s.mu.Unlock()
	if p == nil {
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A profile with id "+id+" does not exist.", nil)
		return
	}
	slices.Sort(ids)
	data := []map[string]any{}
	for _, l := range ids {
		data = append(data, map[string]any{"type": "list", "id": l})
	}
	s.respond(c, http.StatusOK, map[string]any{"data": data,
		"links": map[string]any{"self": c.base + "/api/profiles/" + url.PathEscape(id) + "/relationships/lists/"}})
}
