package fakebrevo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/mail"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// Brevo's error codes (errorModel.code in the spec) the fake answers with,
// plus too_many_requests, which Brevo sends with 429 but the spec does not list.
const (
	CodeUnauthorized       = "unauthorized"
	CodeInvalidParameter   = "invalid_parameter"
	CodeMissingParameter   = "missing_parameter"
	CodeDocumentNotFound   = "document_not_found"
	CodeDuplicateParameter = "duplicate_parameter"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeBadRequest         = "bad_request"
	CodeTooManyRequests    = "too_many_requests"
	// CodeServiceUnavailable is the fake's code for injected 503s (Brevo does
	// not document a body for them).
	CodeServiceUnavailable = "service_unavailable"
)

// Brevo's rate-limit response headers.
const (
	HeaderRateLimitLimit     = "x-sib-ratelimit-limit"
	HeaderRateLimitRemaining = "x-sib-ratelimit-remaining"
	HeaderRateLimitReset     = "x-sib-ratelimit-reset"
)

// ProcessNameImport is the name of the process an import creates.
const ProcessNameImport = "IMPORTUSER"

// Process statuses (getProcess.status). swagger.yaml lists queued,
// in_process and completed; Brevo's current reference adds processing,
// failed and cancelled. The fake answers failed for a process that failed
// whole (Options.ImportFailRate) and never processing or cancelled.
const (
	ProcessQueued    = "queued"
	ProcessInProcess = "in_process"
	ProcessCompleted = "completed"
	ProcessFailed    = "failed"
)

// Error messages, as close to Brevo's as known.
const (
	msgInvalidEmail     = "Invalid email address"
	msgDuplicateEmail   = "Unable to create contact, email is already associated with another Contact"
	msgDuplicateExtID   = "Unable to create contact, ext_id is already associated with another Contact"
	msgContactNotFound  = "Contact does not exist"
	msgProcessNotFound  = "processId is invalid"
	msgUnauthorized     = "Key not found"
	msgTooManyRequests  = "The expected rate limit is exceeded."
	msgUnavailable      = "Service temporarily unavailable"
	msgInvalidJSON      = "Input must be a valid JSON object"
	maxBodyBytes        = 12 << 20 // Brevo allows 10 MB of jsonBody
	unenforcedRateLimit = 1_000_000
)

// ErrBadOptions means Options.Check found an invalid option.
var ErrBadOptions = errors.New("fakebrevo: invalid options")

// Contact is a contact stored by the fake (a copy; see Server.Contact).
type Contact struct {
	ID               int64
	Email            string // lower-cased, as Brevo stores it
	ExtID            string
	Attributes       map[string]any // keys upper-cased; JSON values (string, float64, bool)
	ListIDs          []int64        // sorted
	EmailBlacklisted bool
	SMSBlacklisted   bool
	CreatedAt        time.Time
	ModifiedAt       time.Time
}

// Server is the fake Brevo, an http.Handler. Create it with New.
type Server struct {
	opts      Options
	clock     clock.Clock
	refuse    map[string]bool
	validator *Validator // nil unless opts.Validate
	specErr   error      // why the validator could not be loaded

	mu    sync.Mutex
	rng   *rand.Rand
	st    *state
	stats Stats
	win   map[string]*rateWindow
	// standing is the account's standing (standing.go), "" when good.
	standing string
	// latency is Options.Latency until SetLatency changes it.
	latency time.Duration
	attrs   map[string]Attribute // by upper-case name (attributes.go)
}

type state struct {
	nextContactID int64
	nextProcessID int64
	nextListID    int64
	byEmail       map[string]*contact
	byID          map[int64]*contact
	byExtID       map[string]*contact
	bySMS         map[string]*contact // by SMS number, as stored (phone.go)
	contacts      []*contact          // creation order, IDs ascending
	processes     []*process          // IDs ascending
	queue         []*process          // not yet processed, by readyAt then ID
	lists         map[string]int64
}

type contact struct {
	id       int64
	email    string
	extID    string
	attrs    map[string]any
	lists    []int64 // sorted, unique
	emailBL  bool
	smsBL    bool
	created  time.Time
	modified time.Time
}

type rateWindow struct {
	start time.Time
	count int
	// recent are the times of the requests of the last second
	// (Options.SlidingRateWindow), oldest first.
	recent []time.Time
}

// New returns a fake Brevo configured by opts. Invalid options are clamped
// (see Options.Check to report them instead).
func New(opts Options) *Server {
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	seed := uint64(opts.Seed)
	if opts.Seed == 0 {
		seed = rand.Uint64()
	}
	if opts.AccountLogin == "" {
		opts.AccountLogin = fmt.Sprintf("owner-%016x@fake-brevo.invalid", rand.Uint64())
	}
	s := &Server{
		opts:   opts,
		clock:  clk,
		refuse: make(map[string]bool, len(opts.RefuseEmails)),
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	for _, e := range opts.RefuseEmails {
		s.refuse[normEmail(e)] = true
	}
	if opts.Validate {
		s.validator, s.specErr = NewValidator()
	}
	s.standing, _ = checkStanding(opts.Standing) // Check refuses a wrong one
	s.latency = opts.Latency
	s.resetLocked()
	s.initAttributesLocked()
	return s
}

// Check reports the first invalid option, wrapping ErrBadOptions.
func (o Options) Check() error {
	rates := []struct {
		name string
		v    float64
	}{
		{"error rate", o.ErrorRate},
		{"rate-limit rate", o.RateLimitRate},
		{"drop-response rate", o.DropResponseRate},
		{"import skip rate", o.ImportSkipRate},
		{"import fail rate", o.ImportFailRate},
		{"hold-write rate", o.HoldWriteRate},
	}
	for _, r := range rates {
		if math.IsNaN(r.v) || r.v < 0 || r.v > 1 {
			return fmt.Errorf("%w: %s must be between 0 and 1, got %v", ErrBadOptions, r.name, r.v)
		}
	}
	switch {
	case o.Latency < 0:
		return fmt.Errorf("%w: latency must not be negative", ErrBadOptions)
	case o.ProcessDelay < 0:
		return fmt.Errorf("%w: process delay must not be negative", ErrBadOptions)
	case o.HoldWrite < 0:
		return fmt.Errorf("%w: hold-write delay must not be negative", ErrBadOptions)
	case o.ImportRowDelay < 0:
		return fmt.Errorf("%w: import row delay must not be negative", ErrBadOptions)
	case o.RateLimitPerSecond < 0:
		return fmt.Errorf("%w: rate limit must not be negative", ErrBadOptions)
	case o.OtherRateLimitPerHour < 0:
		return fmt.Errorf("%w: other rate limit must not be negative", ErrBadOptions)
	}
	if o.ReportBaseURL != "" {
		if u, err := url.Parse(o.ReportBaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: report base URL must be an absolute http(s) URL", ErrBadOptions)
		}
	}
	for i, e := range o.RefuseEmails {
		if strings.TrimSpace(e) == "" {
			return fmt.Errorf("%w: refused e-mail #%d is empty", ErrBadOptions, i+1)
		}
	}
	if err := checkConflictAnswer(o.ConflictAnswer); err != nil {
		return err
	}
	if _, err := checkStanding(o.Standing); err != nil {
		return err
	}
	if o.Validate {
		if _, err := NewValidator(); err != nil {
			return err
		}
	}
	return nil
}

// Reset clears every contact, process, counter and rate-limit window.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

func (s *Server) resetLocked() {
	s.st = &state{
		nextContactID: 1,
		nextProcessID: 1,
		nextListID:    1000,
		byEmail:       make(map[string]*contact),
		byID:          make(map[int64]*contact),
		byExtID:       make(map[string]*contact),
		bySMS:         make(map[string]*contact),
		lists:         make(map[string]int64),
	}
	s.stats = Stats{ByRoute: map[string]int64{}, ByStatus: map[string]int64{}}
	s.win = make(map[string]*rateWindow)
}

// Stats returns a copy of the counters (completing due import processes first).
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(s.clock.Now())
	out := s.stats
	out.ByRoute = make(map[string]int64, len(s.stats.ByRoute))
	for k, v := range s.stats.ByRoute {
		out.ByRoute[k] = v
	}
	out.ByStatus = make(map[string]int64, len(s.stats.ByStatus))
	for k, v := range s.stats.ByStatus {
		out.ByStatus[k] = v
	}
	out.DuplicateExamples = slices.Clone(s.stats.DuplicateExamples)
	out.Contacts = int64(len(s.st.byEmail))
	return out
}

// SetLatency changes Options.Latency from the next request on (a test
// that needs runs slow while it acts on them, and quick after).
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	s.latency = max(d, 0)
	s.mu.Unlock()
}

// Contact returns a copy of the contact stored for email (case-insensitive).
func (s *Server) Contact(email string) (Contact, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(s.clock.Now())
	c, ok := s.st.byEmail[normEmail(email)]
	if !ok {
		return Contact{}, false
	}
	return c.export(), true
}

func (c *contact) export() Contact {
	attrs := make(map[string]any, len(c.attrs))
	for k, v := range c.attrs {
		attrs[k] = v
	}
	return Contact{
		ID:               c.id,
		Email:            c.email,
		ExtID:            c.extID,
		Attributes:       attrs,
		ListIDs:          slices.Clone(c.lists),
		EmailBlacklisted: c.emailBL,
		SMSBlacklisted:   c.smsBL,
		CreatedAt:        c.created,
		ModifiedAt:       c.modified,
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_stats":
		if r.Method != http.MethodGet {
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{Code: CodeMethodNotAllowed, Message: "use GET"})
			return
		}
		writeJSON(w, http.StatusOK, s.Stats())
	case r.URL.Path == "/_standing":
		s.serveStanding(w, r)
	case r.URL.Path == "/_reset":
		if r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{Code: CodeMethodNotAllowed, Message: "use POST"})
			return
		}
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(r.URL.Path, ReportPath+"/"):
		s.serveReport(w, r, strings.TrimPrefix(r.URL.Path, ReportPath+"/"))
	case r.URL.Path == BasePath || strings.HasPrefix(r.URL.Path, BasePath+"/"):
		s.serveAPI(w, r)
	default:
		http.NotFound(w, r)
	}
}

// call is one /v3 request in flight.
type call struct {
	w     http.ResponseWriter
	r     *http.Request
	route string   // "POST /v3/contacts/{identifier}"
	segs  []string // path segments after /v3, unescaped
	body  []byte
	now   time.Time
}

// errorBody is Brevo's errorModel, with the metadata Brevo adds to an
// identifier conflict (conflict.go).
type errorBody struct {
	Code     string         `json:"code"`
	Message  string         `json:"message"`
	Metadata *errorMetadata `json:"metadata,omitempty"`
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	segs, ok := splitPath(r.URL.EscapedPath())
	c := &call{w: w, r: r, segs: segs, route: routeOf(r.Method, segs)}
	group := "other"
	if len(segs) > 0 && segs[0] == "contacts" {
		group = "contacts"
	}

	s.mu.Lock()
	s.stats.Requests++
	s.stats.ByRoute[c.route]++
	d := s.latency
	s.mu.Unlock()

	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}

	c.now = s.clock.Now()
	s.mu.Lock()
	s.advanceLocked(c.now)
	limit, remaining, reset, over := s.takeSlotLocked(group, c.now)
	injected429 := s.opts.RateLimitRate > 0 && s.rng.Float64() < s.opts.RateLimitRate
	injected503 := s.opts.ErrorRate > 0 && s.rng.Float64() < s.opts.ErrorRate
	standing := s.standing
	s.mu.Unlock()

	h := w.Header()
	h.Set(HeaderRateLimitLimit, strconv.Itoa(limit))
	h.Set(HeaderRateLimitRemaining, strconv.Itoa(remaining))
	h.Set(HeaderRateLimitReset, strconv.Itoa(reset))

	if !s.authorized(r) {
		s.fail(c, http.StatusUnauthorized, CodeUnauthorized, msgUnauthorized)
		return
	}
	if status, code, msg := standingAnswer(standing); status != 0 {
		s.fail(c, status, code, msg)
		return
	}
	if over || injected429 {
		h.Set(HeaderRateLimitRemaining, "0")
		s.fail(c, http.StatusTooManyRequests, CodeTooManyRequests, msgTooManyRequests)
		return
	}
	if injected503 {
		s.fail(c, http.StatusServiceUnavailable, CodeServiceUnavailable, msgUnavailable)
		return
	}
	if !ok {
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, "Invalid path encoding")
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, "Request body could not be read or is larger than 10 MB")
		return
	}
	c.body = body

	if s.opts.Validate {
		if s.validator == nil {
			s.fail(c, http.StatusInternalServerError, CodeBadRequest, "the fake could not load the Brevo API spec: "+s.specErr.Error())
			return
		}
		var reqBody []byte
		if len(body) > 0 {
			reqBody = body
		}
		if err := s.validator.ValidateRequest(r, reqBody); err != nil {
			s.mu.Lock()
			s.stats.Invalid++
			s.mu.Unlock()
			s.fail(c, http.StatusBadRequest, CodeInvalidParameter, err.Error())
			return
		}
	}

	held := s.holdWrite(c)
	s.route(c)
	if held {
		// Pending until handled: a test waits for it before counting.
		s.mu.Lock()
		s.stats.HeldPending--
		s.mu.Unlock()
	}
}

// holdWrite holds a write request for HoldWrite, with probability
// HoldWriteRate, without watching its client: the request is then handled
// as if it had just arrived, whether or not anyone still waits for the
// answer (Options.HoldWriteRate). It reports whether it held it.
func (s *Server) holdWrite(c *call) bool {
	if s.opts.HoldWriteRate <= 0 || s.opts.HoldWrite <= 0 || len(c.segs) == 0 || c.segs[0] != "contacts" {
		return false
	}
	switch c.r.Method {
	case http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	s.mu.Lock()
	hold := s.rng.Float64() < s.opts.HoldWriteRate
	if hold {
		s.stats.Held++
		s.stats.HeldPending++
	}
	s.mu.Unlock()
	if !hold {
		return false
	}
	time.Sleep(s.opts.HoldWrite)
	c.now = s.clock.Now()
	s.mu.Lock()
	s.advanceLocked(c.now)
	if c.r.Context().Err() != nil {
		s.stats.HeldAbandoned++
	}
	s.mu.Unlock()
	return true
}

// route dispatches a /v3 call to its operation.
func (s *Server) route(c *call) {
	m, segs := c.r.Method, c.segs
	switch {
	case len(segs) == 1 && segs[0] == "contacts":
		switch m {
		case http.MethodGet:
			s.listContacts(c)
		case http.MethodPost:
			s.createContact(c)
		default:
			s.methodNotAllowed(c)
		}
	case len(segs) == 2 && segs[0] == "contacts" && segs[1] == "import" && m == http.MethodPost:
		s.importContacts(c)
	case len(segs) == 2 && segs[0] == "contacts" && segs[1] == "attributes" && m == http.MethodGet:
		s.getAttributes(c)
	case len(segs) == 4 && segs[0] == "contacts" && segs[1] == "attributes" && m == http.MethodPost:
		s.createAttribute(c, segs[2], segs[3])
	case len(segs) == 2 && segs[0] == "contacts":
		switch m {
		case http.MethodGet:
			s.getContact(c)
		case http.MethodPut:
			s.updateContact(c)
		case http.MethodDelete:
			s.deleteContact(c)
		default:
			s.methodNotAllowed(c)
		}
	case len(segs) == 1 && segs[0] == "processes":
		if m != http.MethodGet {
			s.methodNotAllowed(c)
			return
		}
		s.listProcesses(c)
	case len(segs) == 2 && segs[0] == "processes":
		if m != http.MethodGet {
			s.methodNotAllowed(c)
			return
		}
		s.getProcess(c)
	case len(segs) == 1 && segs[0] == "account" && m == http.MethodGet:
		s.getAccount(c)
	case len(segs) == 3 && segs[0] == "contacts" && segs[1] == "lists" && m == http.MethodGet:
		s.getList(c, segs[2])
	default:
		s.fail(c, http.StatusNotFound, CodeDocumentNotFound, "The fake Brevo does not implement "+c.route)
	}
}

func (s *Server) methodNotAllowed(c *call) {
	s.fail(c, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "Method not allowed")
}

// splitPath returns the unescaped segments of an escaped path after /v3.
func splitPath(escaped string) ([]string, bool) {
	rest := strings.Trim(strings.TrimPrefix(escaped, BasePath), "/")
	if rest == "" {
		return nil, true
	}
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return parts, false
		}
		parts[i] = u
	}
	return parts, true
}

// routeOf names a call's route for Stats.ByRoute, with identifiers templated.
func routeOf(method string, segs []string) string {
	switch {
	case len(segs) == 2 && segs[0] == "contacts" && segs[1] == "attributes" && method == http.MethodGet:
		return method + " " + BasePath + "/contacts/attributes"
	case len(segs) == 4 && segs[0] == "contacts" && segs[1] == "attributes":
		return method + " " + BasePath + "/contacts/attributes/{attributeCategory}/{attributeName}"
	case len(segs) == 2 && segs[0] == "contacts" && !(segs[1] == "import" && method == http.MethodPost):
		return method + " " + BasePath + "/contacts/{identifier}"
	case len(segs) == 2 && segs[0] == "processes":
		return method + " " + BasePath + "/processes/{processId}"
	case len(segs) <= 2:
		return method + " " + BasePath + "/" + strings.Join(segs, "/")
	default:
		return method + " " + BasePath + "/" + segs[0] + "/..."
	}
}

func (s *Server) authorized(r *http.Request) bool {
	key := r.Header.Get("api-key")
	if key == "" {
		return false
	}
	return s.opts.APIKey == "" || key == s.opts.APIKey || slices.Contains(s.opts.OtherAPIKeys, key)
}

// takeSlotLocked counts a request in its group's window and returns the
// rate-limit header values and whether the request is over the limit.
// Brevo limits /v3/contacts* per second (RateLimitPerSecond) and every
// other endpoint (/v3/account, /v3/processes...) per hour
// (OtherRateLimitPerHour: "All other endpoints: 100 RPH" on the general
// tier, developers.brevo.com/docs/api-limits), each group with its own
// headers. A group is enforced only when its limit is set; otherwise the
// headers report a generous limit.
func (s *Server) takeSlotLocked(group string, now time.Time) (limit, remaining, reset int, over bool) {
	size := time.Second
	limit = s.opts.RateLimitPerSecond
	if group != "contacts" {
		size, limit = time.Hour, s.opts.OtherRateLimitPerHour
	}
	enforced := limit > 0
	if !enforced {
		limit = unenforcedRateLimit
	}
	if group == "contacts" && s.opts.SlidingRateWindow {
		win := s.win[group]
		if win == nil {
			win = &rateWindow{}
			s.win[group] = win
		}
		from := now.Add(-size)
		i := 0
		for i < len(win.recent) && !win.recent[i].After(from) {
			i++
		}
		win.recent = append(win.recent[i:], now)
		n := len(win.recent)
		remaining = max(0, limit-n)
		reset = int(math.Floor(win.recent[0].Add(size).Sub(now).Seconds()))
		return limit, remaining, reset, enforced && n > limit
	}
	start := now.Truncate(size)
	win := s.win[group]
	if win == nil || !win.start.Equal(start) {
		win = &rateWindow{start: start}
		s.win[group] = win
	}
	win.count++
	remaining = max(0, limit-win.count)
	// Whole seconds, rounded down: Brevo documents the reset as the "time
	// remaining until the rate limit resets, expressed in the granularity
	// unit (typically seconds)", so in a window's last second it may say 0
	// (developers.brevo.com/docs/limit-headers). A client must not take 0
	// as "send now".
	reset = int(math.Floor(start.Add(size).Sub(now).Seconds()))
	return limit, remaining, reset, enforced && win.count > limit
}

// fail answers a Brevo error.
func (s *Server) fail(c *call, status int, code, message string) {
	s.respond(c, status, errorBody{Code: code, Message: message})
}

// respond writes a JSON response (no body when v is nil) and counts it.
func (s *Server) respond(c *call, status int, v any) {
	s.mu.Lock()
	s.stats.ByStatus[strconv.Itoa(status)]++
	s.mu.Unlock()
	if v == nil {
		c.w.WriteHeader(status)
		return
	}
	writeJSON(c.w, status, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":"bad_request","message":"the fake could not encode its response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// afterWrite runs the AfterWrite hook and, with probability DropResponseRate,
// cuts the connection without a response. It reports whether the response
// may still be sent.
func (s *Server) afterWrite(c *call) bool {
	if s.opts.AfterWrite != nil {
		s.opts.AfterWrite(c.r)
	}
	if s.opts.DropResponseRate <= 0 {
		return true
	}
	s.mu.Lock()
	drop := s.rng.Float64() < s.opts.DropResponseRate
	if drop {
		s.stats.Dropped++
	}
	s.mu.Unlock()
	if !drop {
		return true
	}
	conn, _, err := http.NewResponseController(c.w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2, a recorder): abort the response instead.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
	return false
}

// ---- contacts ----

type createContactRequest struct {
	Email            *string        `json:"email"`
	ExtID            *string        `json:"ext_id"`
	Attributes       map[string]any `json:"attributes"`
	EmailBlacklisted *bool          `json:"emailBlacklisted"`
	SMSBlacklisted   *bool          `json:"smsBlacklisted"`
	ListIDs          []int64        `json:"listIds"`
	UpdateEnabled    bool           `json:"updateEnabled"`
}

type updateContactRequest struct {
	Attributes       map[string]any `json:"attributes"`
	ExtID            *string        `json:"ext_id"`
	EmailBlacklisted *bool          `json:"emailBlacklisted"`
	SMSBlacklisted   *bool          `json:"smsBlacklisted"`
	ListIDs          []int64        `json:"listIds"`
	UnlinkListIDs    []int64        `json:"unlinkListIds"`
}

// contactWrite is what one write sets on a contact.
type contactWrite struct {
	attrs       map[string]any // nil value: erase the attribute
	addLists    []int64
	removeLists []int64
	extID       *string
	emailBL     *bool
	smsBL       *bool
	newEmail    string // non-empty: change the contact's e-mail
	via         string // how it was written (Stats.DuplicateExamples)
}

type contactJSON struct {
	Email            string         `json:"email,omitempty"`
	ID               int64          `json:"id"`
	EmailBlacklisted bool           `json:"emailBlacklisted"`
	SMSBlacklisted   bool           `json:"smsBlacklisted"`
	CreatedAt        string         `json:"createdAt"`
	ModifiedAt       string         `json:"modifiedAt"`
	ListIDs          []int64        `json:"listIds"`
	Attributes       map[string]any `json:"attributes"`
	Statistics       *struct{}      `json:"statistics,omitempty"`
}

// brevoTime is Brevo's date-time format (YYYY-MM-DDTHH:mm:ss.SSSZ).
const brevoTime = "2006-01-02T15:04:05.000Z07:00"

func (c *contact) json(extended bool) contactJSON {
	attrs := make(map[string]any, len(c.attrs)+1)
	for k, v := range c.attrs {
		attrs[k] = v
	}
	if c.extID != "" {
		// getContactDetails has no ext_id field; Brevo shows the identifier
		// as the EXT_ID attribute (as its exports and imports name it).
		attrs[extIDAttribute] = c.extID
	}
	out := contactJSON{
		Email:            c.email,
		ID:               c.id,
		EmailBlacklisted: c.emailBL,
		SMSBlacklisted:   c.smsBL,
		CreatedAt:        c.created.UTC().Format(brevoTime),
		ModifiedAt:       c.modified.UTC().Format(brevoTime),
		ListIDs:          append([]int64{}, c.lists...),
		Attributes:       attrs,
	}
	if extended {
		out.Statistics = &struct{}{}
	}
	return out
}

func (s *Server) createContact(c *call) {
	var req createContactRequest
	if err := decodeObject(c.body, &req); err != nil {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, msgInvalidJSON)
		return
	}
	if req.Email == nil || strings.TrimSpace(*req.Email) == "" {
		s.fail(c, http.StatusBadRequest, CodeMissingParameter, "email is missing (the fake only supports contacts with an email)")
		return
	}
	email := normEmail(*req.Email)
	if !validEmail(email) || s.refuse[email] {
		s.mu.Lock()
		s.stats.Refused++
		s.mu.Unlock()
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, msgInvalidEmail)
		return
	}
	attrs := normAttrs(req.Attributes)
	sms := normSMS(attrs)
	wr := contactWrite{
		via:      "POST /contacts",
		attrs:    attrs,
		addLists: req.ListIDs,
		extID:    takeExtID(attrs, req.ExtID),
		emailBL:  req.EmailBlacklisted,
		smsBL:    req.SMSBlacklisted,
	}

	s.mu.Lock()
	st := s.st
	existing := st.byEmail[email]
	if wr.extID != nil && *wr.extID != "" {
		if other := st.byExtID[*wr.extID]; other != nil && other != existing {
			s.mu.Unlock()
			s.conflict(c, identExtID, msgDuplicateExtID)
			return
		}
	}
	if st.smsOwner(sms, existing) != nil {
		s.mu.Unlock()
		s.conflict(c, identSMS, msgDuplicateSMS)
		return
	}
	if existing != nil && !req.UpdateEnabled {
		s.mu.Unlock()
		s.conflict(c, identEmail, msgDuplicateEmail)
		return
	}
	var id int64
	if existing != nil {
		s.writeLocked(existing, wr, c.now)
	} else {
		id = s.createLocked(email, wr, c.now).id
	}
	s.mu.Unlock()

	if !s.afterWrite(c) {
		return
	}
	if existing != nil {
		s.respond(c, http.StatusNoContent, nil)
		return
	}
	s.respond(c, http.StatusCreated, map[string]int64{"id": id})
}

// lookupLocked finds a contact by identifier, per the identifierType query
// parameter (email_id, contact_id, ext_id) or, without it, as Brevo does: an
// all-digit identifier is an ID, anything else an e-mail address.
func (s *Server) lookupLocked(c *call) (*contact, *errorBody) {
	ident := c.segs[1]
	typ := c.r.URL.Query().Get("identifierType")
	if typ == "" {
		typ = "email_id"
		if _, err := strconv.ParseInt(ident, 10, 64); err == nil {
			typ = "contact_id"
		}
	}
	var found *contact
	switch typ {
	case "email_id":
		found = s.st.byEmail[normEmail(ident)]
	case "contact_id":
		id, err := strconv.ParseInt(ident, 10, 64)
		if err != nil {
			return nil, &errorBody{Code: CodeInvalidParameter, Message: "identifier must be a contact ID when identifierType is contact_id"}
		}
		found = s.st.byID[id]
	case "ext_id":
		found = s.st.byExtID[ident]
	default:
		return nil, &errorBody{Code: CodeInvalidParameter, Message: "identifierType " + strconv.Quote(typ) + " is not supported by the fake (email_id, contact_id, ext_id)"}
	}
	if found == nil {
		return nil, &errorBody{Code: CodeDocumentNotFound, Message: msgContactNotFound}
	}
	return found, nil
}

func statusOf(e *errorBody) int {
	if e.Code == CodeDocumentNotFound {
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

func (s *Server) getContact(c *call) {
	s.mu.Lock()
	found, e := s.lookupLocked(c)
	var out contactJSON
	if found != nil {
		out = found.json(true)
	}
	s.mu.Unlock()
	if e != nil {
		s.fail(c, statusOf(e), e.Code, e.Message)
		return
	}
	s.respond(c, http.StatusOK, out)
}

// deleteContact is DELETE /contacts/{identifier}: the contact is gone,
// with its lists and attributes, as a person deleting it in Brevo leaves it.
func (s *Server) deleteContact(c *call) {
	s.mu.Lock()
	found, e := s.lookupLocked(c)
	if found != nil {
		st := s.st
		delete(st.byEmail, found.email)
		delete(st.byID, found.id)
		if found.extID != "" && st.byExtID[found.extID] == found {
			delete(st.byExtID, found.extID)
		}
		if sms, ok := found.attrs[smsAttribute].(string); ok && st.bySMS[sms] == found {
			delete(st.bySMS, sms)
		}
		if i := slices.Index(st.contacts, found); i >= 0 {
			st.contacts = slices.Delete(st.contacts, i, i+1)
		}
	}
	s.mu.Unlock()
	if e != nil {
		s.fail(c, statusOf(e), e.Code, e.Message)
		return
	}
	s.respond(c, http.StatusNoContent, nil)
}

func (s *Server) updateContact(c *call) {
	var req updateContactRequest
	if err := decodeObject(c.body, &req); err != nil {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, msgInvalidJSON)
		return
	}
	attrs := normAttrs(req.Attributes)
	wr := contactWrite{
		via:         "PUT /contacts/{identifier}",
		attrs:       attrs,
		addLists:    req.ListIDs,
		removeLists: req.UnlinkListIDs,
		extID:       takeExtID(attrs, req.ExtID),
		emailBL:     req.EmailBlacklisted,
		smsBL:       req.SMSBlacklisted,
	}
	if v, ok := attrs["EMAIL"]; ok {
		delete(attrs, "EMAIL")
		str, _ := v.(string)
		wr.newEmail = normEmail(str)
		if !validEmail(wr.newEmail) || s.refuse[wr.newEmail] {
			s.mu.Lock()
			s.stats.Refused++
			s.mu.Unlock()
			s.fail(c, http.StatusBadRequest, CodeInvalidParameter, msgInvalidEmail)
			return
		}
	}

	s.mu.Lock()
	found, e := s.lookupLocked(c)
	if e == nil && wr.newEmail != "" {
		if other := s.st.byEmail[wr.newEmail]; other != nil && other != found {
			e = s.conflictBody(identEmail, "Unable to update contact, email is already associated with another Contact")
		}
	}
	if e == nil && wr.extID != nil && *wr.extID != "" {
		if other := s.st.byExtID[*wr.extID]; other != nil && other != found {
			e = s.conflictBody(identExtID, "Unable to update contact, ext_id is already associated with another Contact")
		}
	}
	if e == nil && s.st.smsOwner(normSMS(wr.attrs), found) != nil {
		e = s.conflictBody(identSMS, msgDuplicateSMS)
	}
	if e != nil {
		s.mu.Unlock()
		s.respond(c, statusOf(e), *e)
		return
	}
	s.writeLocked(found, wr, c.now)
	s.mu.Unlock()

	if !s.afterWrite(c) {
		return
	}
	s.respond(c, http.StatusNoContent, nil)
}

func (s *Server) listContacts(c *call) {
	q := c.r.URL.Query()
	limit, e := intParam(q, "limit", 50, 0, 1000)
	if e == nil {
		var offset int
		offset, e = intParam(q, "offset", 0, 0, math.MaxInt32)
		if e == nil {
			s.listContactsPage(c, q, limit, offset)
			return
		}
	}
	s.fail(c, http.StatusBadRequest, e.Code, e.Message)
}

func (s *Server) listContactsPage(c *call, q url.Values, limit, offset int) {
	var modifiedSince, createdSince time.Time
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"modifiedSince", &modifiedSince}, {"createdSince", &createdSince}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			s.fail(c, http.StatusBadRequest, CodeInvalidParameter, p.name+" must be a date-time like YYYY-MM-DDTHH:mm:ss.SSSZ")
			return
		}
		*p.dst = t
	}
	desc, e := sortParam(q)
	if e != nil {
		s.fail(c, http.StatusBadRequest, e.Code, e.Message)
		return
	}
	for _, unsupported := range []string{"segmentId", "filter"} {
		if q.Has(unsupported) {
			s.fail(c, http.StatusBadRequest, CodeInvalidParameter, unsupported+" is not supported by the fake")
			return
		}
	}
	var lists []int64
	for _, v := range q["listIds"] {
		for _, part := range strings.Split(v, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
			if err != nil {
				s.fail(c, http.StatusBadRequest, CodeInvalidParameter, "listIds must be integers")
				return
			}
			lists = append(lists, id)
		}
	}

	s.mu.Lock()
	all := s.st.contacts
	page := make([]contactJSON, 0, min(limit, len(all)))
	count := 0
	for i := range all {
		ct := all[i]
		if desc {
			ct = all[len(all)-1-i]
		}
		if !modifiedSince.IsZero() && ct.modified.Before(modifiedSince) {
			continue
		}
		if !createdSince.IsZero() && ct.created.Before(createdSince) {
			continue
		}
		if len(lists) > 0 && !slices.ContainsFunc(lists, func(id int64) bool { _, ok := slices.BinarySearch(ct.lists, id); return ok }) {
			continue
		}
		if count >= offset && len(page) < limit {
			page = append(page, ct.json(false))
		}
		count++
	}
	s.mu.Unlock()
	s.respond(c, http.StatusOK, struct {
		Contacts []contactJSON `json:"contacts"`
		Count    int           `json:"count"`
	}{page, count})
}

// createLocked stores a new contact and counts the write.
func (s *Server) createLocked(email string, wr contactWrite, now time.Time) *contact {
	st := s.st
	ct := &contact{id: st.nextContactID, email: email, attrs: map[string]any{}, created: now}
	st.nextContactID++
	st.byEmail[email] = ct
	st.byID[ct.id] = ct
	st.contacts = append(st.contacts, ct)
	s.applyLocked(ct, wr, now)
	s.stats.ContactsWritten++
	return ct
}

// writeLocked applies a write to an existing contact and counts it; a write
// that changes nothing is a duplicate write.
func (s *Server) writeLocked(ct *contact, wr contactWrite, now time.Time) {
	if !s.applyLocked(ct, wr, now) {
		s.stats.DuplicateWrites++
		if len(s.stats.DuplicateExamples) < maxDuplicateExamples {
			s.stats.DuplicateExamples = append(s.stats.DuplicateExamples,
				fmt.Sprintf("%s by %s at %s", ct.email, wr.via, now.UTC().Format("15:04:05.000")))
		}
	}
	s.stats.ContactsWritten++
}

// applyLocked applies wr to ct and reports whether anything changed.
func (s *Server) applyLocked(ct *contact, wr contactWrite, now time.Time) bool {
	st := s.st
	changed := false
	defer st.indexSMS(ct, ct.attrs[smsAttribute])
	for k, v := range wr.attrs {
		switch {
		case v != nil && !s.keepsLocked(k, v):
			// Not the account's, or not of its type: dropped (attributes.go).
			s.stats.ValuesDropped++
			continue
		case v == nil && !s.definedLocked(k):
			continue
		}
		old, had := ct.attrs[k]
		if v == nil {
			if had {
				delete(ct.attrs, k)
				changed = true
			}
			continue
		}
		if !had || !reflect.DeepEqual(old, v) {
			ct.attrs[k] = v
			changed = true
		}
	}
	for _, id := range wr.addLists {
		if i, ok := slices.BinarySearch(ct.lists, id); !ok {
			ct.lists = slices.Insert(ct.lists, i, id)
			changed = true
		}
	}
	for _, id := range wr.removeLists {
		if i, ok := slices.BinarySearch(ct.lists, id); ok {
			ct.lists = slices.Delete(ct.lists, i, i+1)
			changed = true
		}
	}
	if wr.extID != nil && *wr.extID != ct.extID {
		if ct.extID != "" {
			delete(st.byExtID, ct.extID)
		}
		ct.extID = *wr.extID
		if ct.extID != "" {
			st.byExtID[ct.extID] = ct
		}
		changed = true
	}
	if wr.emailBL != nil && *wr.emailBL != ct.emailBL {
		ct.emailBL = *wr.emailBL
		changed = true
	}
	if wr.smsBL != nil && *wr.smsBL != ct.smsBL {
		ct.smsBL = *wr.smsBL
		changed = true
	}
	if wr.newEmail != "" && wr.newEmail != ct.email {
		delete(st.byEmail, ct.email)
		ct.email = wr.newEmail
		st.byEmail[ct.email] = ct
		changed = true
	}
	ct.modified = now
	return changed
}

// ---- helpers ----

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// decodeObject decodes a JSON object (not null, not an array) into v.
func decodeObject(b []byte, v any) error {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return json.Unmarshal(b, v)
		default:
			return errors.New("not a JSON object")
		}
	}
	return errors.New("not a JSON object")
}

func intParam(q url.Values, name string, def, lo, hi int) (int, *errorBody) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &errorBody{Code: CodeInvalidParameter, Message: name + " must be an integer"}
	}
	if n < lo || n > hi {
		return 0, &errorBody{Code: CodeInvalidParameter, Message: fmt.Sprintf("%s must be between %d and %d", name, lo, hi)}
	}
	return n, nil
}

func sortParam(q url.Values) (desc bool, e *errorBody) {
	switch q.Get("sort") {
	case "", "desc":
		return true, nil
	case "asc":
		return false, nil
	}
	return false, &errorBody{Code: CodeInvalidParameter, Message: "sort must be asc or desc"}
}

func normEmail(e string) string { return strings.ToLower(strings.TrimSpace(e)) }

// validEmail accepts a bare address (no display name) with a dotted domain.
func validEmail(e string) bool {
	if e == "" || len(e) > 254 || strings.ContainsAny(e, " \t\r\n") {
		return false
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Name != "" || a.Address != e {
		return false
	}
	at := strings.LastIndexByte(e, '@')
	domain := e[at+1:]
	return at > 0 && strings.Contains(domain, ".") && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".")
}

// takeExtID returns the ext_id a write sets: the ext_id field, else an
// EXT_ID attribute, which is removed from attrs either way (the fake stores
// the identifier once, as Brevo does, whichever way it came).
func takeExtID(attrs map[string]any, extID *string) *string {
	v, ok := attrs[extIDAttribute]
	if !ok {
		return extID
	}
	delete(attrs, extIDAttribute)
	if extID != nil {
		return extID
	}
	s := scalarString(v)
	return &s
}

// normAttrs upper-cases attribute names (Brevo's attributes are upper-case).
// Values are kept as decoded; a nil (JSON null) value erases the attribute
// on write.
func normAttrs(in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[strings.ToUpper(k)] = v
	}
	return out
}

func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	s, ok := v.(string)
	return ok && s == ""
}
