package fakehubspot

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// Routes.
const (
	basePath       = "/crm/v3/"
	contactsBatch  = "/crm/v3/objects/contacts/batch/"
	propertiesPath = "/crm/v3/properties/contacts"
	mergePath      = "/crm/v3/objects/contacts/merge"
	// accountInfoPath is the account's details (Account information API).
	accountInfoPath = "/account-info/v3/details"
	tokenInfoPath   = "/oauth/v2/private-apps/get/access-token-info"
	maxBodyBytes    = 10 << 20
)

// Server is the fake. It is safe for concurrent use.
type Server struct {
	o     Options
	clk   clock.Clock
	props map[string]Property

	mu       sync.Mutex
	rng      *mrand.Rand
	contacts map[string]*Contact // by hs_object_id
	// index finds live contacts by email and by each unique property's value.
	index map[string]map[string]*Contact
	// secondary finds live contacts by a secondary e-mail address
	// (hs_additional_emails), lower-cased.
	secondary map[string]*Contact
	nextID    int64
	window    []time.Time // the rolling window's requests
	passed    int         // API requests past auth and rate limit
	writes    int         // writes applied
	stats     Stats
	standing  string // the account's standing (standing.go), "" when good
}

// New returns a fake configured by o.
func New(o Options) *Server {
	if o.RateLimit == 0 {
		o.RateLimit = DefaultRateLimit
	}
	if o.ErrorStatus == 0 {
		o.ErrorStatus = http.StatusServiceUnavailable
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	seed := uint64(o.Seed)
	if seed == 0 {
		seed = mrand.Uint64()
	}
	if o.PortalID == 0 {
		o.PortalID = 10_000_000 + mrand.Int64N(90_000_000)
	}
	s := &Server{
		o: o, clk: clk, props: map[string]Property{},
		rng:      mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		contacts: map[string]*Contact{}, nextID: 100, index: map[string]map[string]*Contact{},
		secondary: map[string]*Contact{},
		stats:     Stats{ByRoute: map[string]int64{}, ByStatus: map[string]int64{}},
	}
	for _, p := range append(slices.Clone(defaultProperties), o.Properties...) {
		p.Name = strings.ToLower(p.Name)
		s.props[p.Name] = p
	}
	s.standing, _ = checkStanding(o.Standing) // Serve refuses a wrong one
	return s
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ByRoute = make(map[string]int64, len(s.stats.ByRoute))
	for k, v := range s.stats.ByRoute {
		st.ByRoute[k] = v
	}
	st.ByStatus = make(map[string]int64, len(s.stats.ByStatus))
	for k, v := range s.stats.ByStatus {
		st.ByStatus[k] = v
	}
	st.DuplicateExamples = slices.Clone(s.stats.DuplicateExamples)
	st.Contacts, st.Archived, st.Merged = 0, 0, 0
	for _, c := range s.contacts {
		if c.MergedInto != "" {
			st.Merged++
			continue
		}
		if c.Archived {
			st.Archived++
		} else {
			st.Contacts++
		}
	}
	return st
}

// Contact returns the live contact whose email (case-insensitive) or
// unique property value is v.
func (s *Server) Contact(v string) (Contact, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.findAny(v); c != nil {
		cp := *c
		cp.Properties = make(map[string]string, len(c.Properties))
		for k, x := range c.Properties {
			cp.Properties[k] = x
		}
		return cp, true
	}
	return Contact{}, false
}

// Put stores a contact with props (a test's existing data); it returns its id.
func (s *Server) Put(props map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.create(props)
	return c.ID
}

func (s *Server) findAny(v string) *Contact {
	if c := s.find("email", v); c != nil {
		return c
	}
	for name, p := range s.props {
		if p.Unique && name != "hs_object_id" {
			if c := s.find(name, v); c != nil {
				return c
			}
		}
	}
	return nil
}

// find returns the live contact whose property prop is v (email
// case-insensitive; hs_object_id is the id).
func (s *Server) find(prop, v string) *Contact {
	if prop == "hs_object_id" {
		c := s.contacts[v]
		for c != nil && c.MergedInto != "" {
			c = s.contacts[c.MergedInto]
		}
		if c != nil && !c.Archived {
			return c
		}
		return nil
	}
	if prop == "email" {
		v = strings.ToLower(strings.TrimSpace(v))
	}
	if v == "" {
		return nil
	}
	if s.indexed(prop) {
		if c := s.index[prop][v]; c != nil || prop != "email" {
			return c
		}
		if c := s.secondary[v]; c != nil && !c.Archived {
			return c
		}
		return nil
	}
	for _, c := range s.contacts {
		if !c.Archived && c.MergedInto == "" && c.Properties[prop] == v {
			return c
		}
	}
	return nil
}

// indexed reports whether prop's values are in the index: email and the
// unique properties.
func (s *Server) indexed(prop string) bool { return prop == "email" || s.props[prop].Unique }

// setProp sets c's property k to v, keeping the index.
func (s *Server) setProp(c *Contact, k, v string) {
	if s.indexed(k) {
		if old, ok := c.Properties[k]; ok && s.index[k][old] == c {
			delete(s.index[k], old)
		}
		if v != "" && !c.Archived {
			if s.index[k] == nil {
				s.index[k] = map[string]*Contact{}
			}
			s.index[k][v] = c
		}
	}
	c.Properties[k] = v
}

// archive archives c and drops it from the index.
func (s *Server) archiveContact(c *Contact) {
	for k, v := range c.Properties {
		if s.indexed(k) && s.index[k][v] == c {
			delete(s.index[k], v)
		}
	}
	for e, o := range s.secondary {
		if o == c {
			delete(s.secondary, e)
		}
	}
	c.Archived = true
}

// Merge merges the contact objectIdToMerge into primaryObjectId, as
// POST /crm/v3/objects/contacts/merge does (the package comment says how),
// and returns the primary contact's id.
func (s *Server) Merge(primaryObjectID, objectIDToMerge string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, m := s.find("hs_object_id", primaryObjectID), s.find("hs_object_id", objectIDToMerge)
	switch {
	case p == nil || m == nil:
		return "", fmt.Errorf("contact %s or %s not found", primaryObjectID, objectIDToMerge)
	case p == m:
		return "", fmt.Errorf("contacts %s and %s are one contact", primaryObjectID, objectIDToMerge)
	}
	// The merged contact's addresses become the primary's secondary ones.
	emails := splitEmails(p.Properties["hs_additional_emails"])
	emails = append(emails, m.Properties["email"])
	emails = append(emails, splitEmails(m.Properties["hs_additional_emails"])...)
	recent := m.Updated.After(p.Updated)
	props := make(map[string]string, len(m.Properties))
	for k, v := range m.Properties {
		props[k] = v
	}
	for k := range m.Properties {
		if s.indexed(k) && s.index[k][m.Properties[k]] == m {
			delete(s.index[k], m.Properties[k])
		}
	}
	for e, o := range s.secondary {
		if o == m {
			delete(s.secondary, e)
		}
	}
	m.MergedInto = p.ID
	for k, v := range props {
		switch k {
		case "email", "hs_object_id", "hs_additional_emails":
			continue
		}
		// The most recent value of each property is kept (HubSpot's "Merge
		// contacts" article); a unique value only where the primary has none.
		if v != "" && (p.Properties[k] == "" || (recent && !s.indexed(k))) {
			s.setProp(p, k, v)
		}
	}
	var kept []string
	for _, e := range emails {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" || e == p.Properties["email"] || slices.Contains(kept, e) {
			continue
		}
		kept = append(kept, e)
		s.secondary[e] = p
	}
	p.Properties["hs_additional_emails"] = strings.Join(kept, ";")
	p.Updated = s.clk.Now().UTC()
	return p.ID, nil
}

func splitEmails(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ";")
}

func (s *Server) create(props map[string]string) *Contact {
	s.nextID++
	id := strconv.FormatInt(s.nextID, 10)
	now := s.clk.Now().UTC()
	c := &Contact{ID: id, Properties: map[string]string{}, Created: now, Updated: now}
	for k, v := range props {
		s.setProp(c, strings.ToLower(k), s.stored(k, v))
	}
	s.setProp(c, "hs_object_id", id)
	s.contacts[id] = c
	return c
}

// write applies props to c (nil: a new contact) and counts the write.
func (s *Server) write(c *Contact, props map[string]string, route string) (*Contact, bool) {
	s.stats.ContactsWritten++
	if c == nil {
		c = s.create(props)
		c.Writes = 1
		return c, true
	}
	same := true
	for k, v := range props {
		k = strings.ToLower(k)
		nv := s.stored(k, v)
		if k == "lifecyclestage" && s.backward(c.Properties[k], nv) {
			// Kept, silently (the package comment cites HubSpot).
			s.stats.StagesKept++
			same = false
			continue
		}
		if c.Properties[k] != nv {
			same = false
		}
		s.setProp(c, k, nv)
	}
	if same {
		s.stats.DuplicateWrites++
		if len(s.stats.DuplicateExamples) < 20 {
			s.stats.DuplicateExamples = append(s.stats.DuplicateExamples, fmt.Sprintf("contact %s by %s", c.ID, route))
		}
	}
	c.Writes++
	c.Updated = s.clk.Now().UTC()
	return c, false
}

// backward reports whether lifecyclestage moving from cur to v goes back
// in the options' order (clearing it, or setting it on a contact without
// one, does not).
func (s *Server) backward(cur, v string) bool {
	opts := s.props["lifecyclestage"].Options
	i, j := slices.Index(opts, cur), slices.Index(opts, v)
	return cur != "" && v != "" && i >= 0 && j >= 0 && j < i
}

// stored is v as HubSpot keeps and returns property k: an e-mail address
// lower-cased, a date as YYYY-MM-DD and a datetime as an ISO 8601 instant
// in UTC, whichever accepted form it was written in (HubSpot's API FAQ:
// "Time values are represented in ISO 8601 format in responses, but the
// APIs will accept either of two formats", ISO 8601 or epoch
// milliseconds).
func (s *Server) stored(k, v string) string {
	v = normalize(k, v)
	if v == "" {
		return v
	}
	switch s.props[k].Type {
	case "date":
		if t, ok := parseTime(v); ok {
			return t.UTC().Format(time.DateOnly)
		}
	case "datetime":
		if t, ok := parseTime(v); ok {
			return t.UTC().Format("2006-01-02T15:04:05.000Z")
		}
	case "enumeration":
		// The package comment says what this models.
		if opts := s.props[k].Options; len(opts) > 0 {
			parts := strings.Split(v, ";")
			kept := make([]string, 0, len(parts))
			for _, o := range opts {
				if slices.Contains(parts, o) {
					kept = append(kept, o)
				}
			}
			return strings.Join(kept, ";")
		}
	}
	return v
}

// parseTime reads a date or datetime value in a form HubSpot accepts.
func parseTime(v string) (time.Time, bool) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), true
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

func normalize(k, v string) string {
	if strings.EqualFold(k, "email") {
		return strings.ToLower(strings.TrimSpace(v))
	}
	return v
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_stats" && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Stats())
		return
	}
	if r.URL.Path == "/_standing" {
		s.serveStanding(w, r)
		return
	}
	if r.URL.Path == tokenInfoPath {
		// Not an API call: no bearer token, no rate limit (the token is
		// the body's).
		s.tokenInfo(w, r)
		return
	}
	if !strings.HasPrefix(r.URL.Path, basePath) && r.URL.Path != accountInfoPath {
		s.error(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "Page not found", nil)
		return
	}
	route := r.Method + " " + r.URL.Path
	s.mu.Lock()
	s.stats.Requests++
	s.stats.ByRoute[route]++
	s.mu.Unlock()
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		s.mu.Lock()
		s.stats.ByStatus[strconv.Itoa(rec.status)]++
		s.mu.Unlock()
	}()
	w = rec
	if s.o.Latency > 0 {
		select {
		case <-time.After(s.o.Latency):
		case <-r.Context().Done():
			return
		}
	}
	if s.o.RedirectTo != "" {
		w.Header().Set("Location", strings.TrimRight(s.o.RedirectTo, "/")+r.URL.RequestURI())
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	if !s.authorized(r) {
		s.error(w, http.StatusUnauthorized, "INVALID_AUTHENTICATION",
			"Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview", nil)
		return
	}
	if s.refuseForStanding(w) {
		return
	}
	if !s.admit(w) {
		return
	}
	s.mu.Lock()
	s.passed++
	fail := s.o.FailAll || s.passed <= s.o.FailFirst || (s.o.ErrorRate > 0 && s.rng.Float64() < s.o.ErrorRate)
	s.mu.Unlock()
	if fail {
		s.error(w, s.o.ErrorStatus, "INTERNAL_ERROR", "internal error (injected by fakehubspot)", nil)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == accountInfoPath:
		s.accountInfo(w)
	case r.Method == http.MethodGet && r.URL.Path == propertiesPath:
		s.listProperties(w)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, propertiesPath+"/"):
		s.getProperty(w, strings.TrimPrefix(r.URL.Path, propertiesPath+"/"))
	case r.Method == http.MethodPost && r.URL.Path == mergePath:
		s.merge(w, r)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, contactsBatch):
		op := strings.TrimPrefix(r.URL.Path, contactsBatch)
		if s.holdWrite(r, op) {
			// Pending until handled (a dropped answer panics): a test
			// waits for it before counting.
			defer func() {
				s.mu.Lock()
				s.stats.HeldPending--
				s.mu.Unlock()
			}()
		}
		if op != "read" && !slices.Contains(s.scopes(), writeScope) {
			s.error(w, http.StatusForbidden, "MISSING_SCOPES",
				"This app hasn't been granted all required scopes to make this call. Read more about required scopes here: https://developers.hubspot.com/scopes.",
				map[string]any{"requiredGranularScopes": []string{writeScope}})
			return
		}
		s.batch(w, r, op)
	default:
		s.error(w, http.StatusNotFound, "OBJECT_NOT_FOUND", "Unable to route "+route, nil)
	}
}

// holdWrite holds a write request for HoldWrite, with probability
// HoldWriteRate, without watching its client, and reports whether it did
// (Options.HoldWriteRate). Its body is read first, so the request is
// handled whole however long its client waited.
func (s *Server) holdWrite(r *http.Request, op string) bool {
	if s.o.HoldWriteRate <= 0 || s.o.HoldWrite <= 0 || op == "read" {
		return false
	}
	s.mu.Lock()
	hold := s.rng.Float64() < s.o.HoldWriteRate
	if hold {
		s.stats.Held++
		s.stats.HeldPending++
	}
	s.mu.Unlock()
	if !hold {
		return false
	}
	// Read to the end: net/http then notices the client closing its
	// connection and cancels r's context, which tells an abandoned write.
	b, _ := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	r.Body = io.NopCloser(bytes.NewReader(b))
	time.Sleep(s.o.HoldWrite)
	if r.Context().Err() != nil {
		s.mu.Lock()
		s.stats.HeldAbandoned++
		s.mu.Unlock()
	}
	return true
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		return false
	}
	return s.o.Token == "" || tok == s.o.Token || slices.Contains(s.o.OtherTokens, tok)
}

func (s *Server) scopes() []string {
	if s.o.Scopes == nil {
		return DefaultScopes
	}
	return s.o.Scopes
}

// tokenInfo answers POST /oauth/v2/private-apps/get/access-token-info as
// HubSpot documents it (developers.hubspot.com, Private apps: "view the
// scopes of a private app's access token"): {"tokenKey": TOKEN} in, the
// user, hub and app ids and the token's scopes out; a token it does not
// know is a 400.
func (s *Server) tokenInfo(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.error(w, http.StatusMethodNotAllowed, "VALIDATION_ERROR", "use POST", nil)
		return
	}
	var b struct {
		TokenKey string `json:"tokenKey"`
	}
	if json.NewDecoder(io.LimitReader(r.Body, maxBodyBytes)).Decode(&b) != nil || b.TokenKey == "" ||
		(s.o.Token != "" && b.TokenKey != s.o.Token && !slices.Contains(s.o.OtherTokens, b.TokenKey)) {
		s.error(w, http.StatusBadRequest, "BAD_REQUEST", "invalid tokenKey", nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"userId": 1001, "hubId": s.o.PortalID, "appId": 2002, "scopes": s.scopes()})
}

// accountInfo answers GET /account-info/v3/details as HubSpot documents it
// (developers.hubspot.com, Account information API): the portal id and the
// account's settings.
func (s *Server) accountInfo(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"portalId": s.o.PortalID, "accountType": "STANDARD", "timeZone": "US/Eastern",
		"companyCurrency": "USD", "additionalCurrencies": []string{}, "utcOffset": "-05:00",
		"utcOffsetMilliseconds": -18000000, "uiDomain": "app.hubspot.com", "dataHostingLocation": "na1",
	})
}

// admit applies the ten-second rolling limit and sets its headers; it
// answers 429 and returns false past it.
func (s *Server) admit(w http.ResponseWriter) bool {
	now := s.clk.Now()
	s.mu.Lock()
	limit := s.o.RateLimit
	storm := s.stats.Requests <= int64(s.o.RateLimitFirst)
	cut := now.Add(-RateLimitInterval)
	i := 0
	for i < len(s.window) && !s.window[i].After(cut) {
		i++
	}
	s.window = s.window[i:]
	over := storm || (limit > 0 && len(s.window) >= limit)
	var wait time.Duration
	if over {
		s.stats.RateLimited++
		switch {
		case s.o.RateLimitWait > 0:
			wait = s.o.RateLimitWait
		case len(s.window) > 0:
			wait = s.window[0].Add(RateLimitInterval).Sub(now)
		default:
			wait = time.Second
		}
	} else {
		s.window = append(s.window, now)
	}
	remaining := 0
	if limit > 0 {
		remaining = max(limit-len(s.window), 0)
	}
	s.mu.Unlock()
	h := w.Header()
	maxv := limit
	if limit <= 0 {
		maxv, remaining = 1_000_000, 1_000_000
	}
	h.Set("X-HubSpot-RateLimit-Max", strconv.Itoa(maxv))
	h.Set("X-HubSpot-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-HubSpot-RateLimit-Interval-Milliseconds", strconv.Itoa(int(RateLimitInterval/time.Millisecond)))
	if !over {
		return true
	}
	secs := int((wait + time.Second - 1) / time.Second)
	h.Set("Retry-After", strconv.Itoa(max(secs, 1)))
	h.Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status": "error", "message": "You have reached your ten_secondly_rolling limit.",
		"errorType": "RATE_LIMIT", "correlationId": newID(), "policyName": "TEN_SECONDLY_ROLLING", "requestId": newID(),
	})
	return false
}

// error writes HubSpot's error JSON.
func (s *Server) error(w http.ResponseWriter, status int, category, msg string, context map[string]any) {
	body := map[string]any{"status": "error", "message": msg, "correlationId": newID(), "category": category}
	if context != nil {
		body["context"] = context
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// badRequest counts a malformed request and answers 400.
func (s *Server) badRequest(w http.ResponseWriter, msg string, context map[string]any) {
	s.mu.Lock()
	s.stats.Invalid++
	s.mu.Unlock()
	s.error(w, http.StatusBadRequest, "VALIDATION_ERROR", msg, context)
}

// decode reads r's JSON body into v strictly: one object, no unknown field,
// the documented types.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.badRequest(w, "Content-Type must be application/json", nil)
		return false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		s.badRequest(w, "Invalid input JSON: "+err.Error(), nil)
		return false
	}
	if dec.More() {
		s.badRequest(w, "Invalid input JSON: trailing data after the object", nil)
		return false
	}
	return true
}

func (s *Server) listProperties(w http.ResponseWriter) {
	names := make([]string, 0, len(s.props))
	for n := range s.props {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		out = append(out, propertyJSON(s.props[n]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

func (s *Server) getProperty(w http.ResponseWriter, name string) {
	p, ok := s.props[name]
	if !ok {
		s.error(w, http.StatusNotFound, "OBJECT_NOT_FOUND", fmt.Sprintf("Unable to find property %s for object type 0-1", name), nil)
		return
	}
	writeJSON(w, http.StatusOK, propertyJSON(p))
}

func propertyJSON(p Property) map[string]any {
	field := "text"
	switch p.Type {
	case "number":
		field = "number"
	case "bool":
		field = "booleancheckbox"
	case "date", "datetime":
		field = "date"
	case "enumeration":
		field = "select"
	}
	if p.FieldType != "" {
		field = p.FieldType
	}
	opts := make([]map[string]any, len(p.Options))
	for i, o := range p.Options {
		opts[i] = map[string]any{"label": o, "value": o, "displayOrder": i, "hidden": false}
	}
	return map[string]any{
		"name": p.Name, "label": p.Name, "type": p.Type, "fieldType": field, "groupName": "contactinformation", "options": opts,
		"hasUniqueValue": p.Unique, "hidden": false, "formField": true,
		"modificationMetadata": map[string]any{"archivable": true, "readOnlyDefinition": true, "readOnlyValue": p.ReadOnly},
	}
}
