package fakeklaviyo

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

const (
	authPrefix = "Klaviyo-API-Key "
	// jsonAPI is the media type of every body (JSON:API).
	jsonAPI = "application/vnd.api+json"
	// maxBodyBytes bounds a request body: the bulk import's 5 MB, plus room
	// to answer 413 rather than cut the connection.
	maxBodyBytes = 6 << 20
	// maxBulkBody and maxProfileBytes are the spec's "5MB" and "100KB"
	// read in decimal units, the stricter reading.
	maxBulkBody      = 5_000_000
	maxBulkProfiles  = 10_000
	maxProfileBytes  = 100_000
	maxUnsubProfiles = 100
	maxPageSize      = 100
	defaultPageSize  = 20
)

// Server is the fake Klaviyo, an http.Handler. Create it with New.
type Server struct {
	opts      Options
	clock     clock.Clock
	refuse    map[string]bool
	lists     map[string]bool // nil: any list exists
	validator *Validator
	specErr   error
	limits    map[string]RateLimit

	mu       sync.Mutex
	rng      *rand.Rand
	st       *state
	stats    Stats
	standing string // the account's standing (standing.go), "" when good
	win      map[string]*window
	specErrs []error
}

type window struct {
	burstStart, steadyStart time.Time
	burst, steady           int
}

// New returns a fake Klaviyo configured by opts.
func New(opts Options) *Server {
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	seed := uint64(opts.Seed)
	if opts.Seed == 0 {
		seed = rand.Uint64()
	}
	if opts.AccountID == "" {
		opts.AccountID = newAccountID()
	}
	s := &Server{opts: opts, clock: clk, refuse: map[string]bool{},
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for _, e := range opts.RefuseEmails {
		s.refuse[normEmail(e)] = true
	}
	if opts.Lists != nil {
		s.lists = map[string]bool{}
		for _, l := range opts.Lists {
			s.lists[l] = true
		}
	}
	s.validator, s.specErr = NewValidator()
	s.limits = map[string]RateLimit{}
	if s.validator != nil {
		s.limits = s.validator.RateLimits()
	}
	for op, rl := range modelledLimits {
		s.limits[op] = rl
	}
	s.standing, _ = checkStanding(opts.Standing) // Check refuses a wrong one
	s.resetLocked()
	return s
}

// Check reports the first invalid option.
func (o Options) Check() error {
	if _, err := checkStanding(o.Standing); err != nil {
		return err
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"error rate", o.ErrorRate}, {"rate-limit rate", o.RateLimitRate}, {"drop-response rate", o.DropResponseRate}, {"error-after-write rate", o.ErrorAfterWriteRate},
		{"hold-write rate", o.HoldWriteRate},
		{"job skip rate", o.JobSkipRate}, {"job fail rate", o.JobFailRate}, {"job fail applies", o.JobFailApplies}, {"job refuse rate", o.JobRefuseRate}} {
		if math.IsNaN(r.v) || r.v < 0 || r.v > 1 {
			return fmt.Errorf("fakeklaviyo: %s must be between 0 and 1, got %v", r.name, r.v)
		}
	}
	if o.Latency < 0 || o.WriteLatency < 0 || o.JobDelay < 0 || o.HoldWrite < 0 || o.ErrorsListedAfter < 0 {
		return fmt.Errorf("fakeklaviyo: delays must not be negative")
	}
	if o.JobFailFirst < 0 {
		return fmt.Errorf("fakeklaviyo: job fail first must not be negative")
	}
	_, err := NewValidator()
	return err
}

// Reset clears every profile, job, counter and rate-limit window.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

func (s *Server) resetLocked() {
	s.st = newState()
	s.stats = Stats{ByRoute: map[string]int64{}, ByStatus: map[string]int64{}}
	s.win = map[string]*window{}
	s.specErrs = nil
}

// Stats returns a copy of the counters (applying due jobs first).
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
	out.DuplicateExample = slices.Clone(s.stats.DuplicateExample)
	out.Profiles = int64(len(s.st.profiles))
	return out
}

// SpecErrors returns the fake's own answers found off the spec
// (ValidateResponses).
func (s *Server) SpecErrors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.specErrs)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_stats" && r.Method == http.MethodGet:
		b, _ := json.Marshal(s.Stats())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case r.URL.Path == "/_standing":
		s.serveStanding(w, r)
	case r.URL.Path == "/_reset" && r.Method == http.MethodPost:
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(r.URL.Path, "/api/"):
		s.serveAPI(w, r)
	default:
		http.NotFound(w, r)
	}
}

// call is one /api request in flight.
type call struct {
	w     http.ResponseWriter
	r     *http.Request
	op    string   // operationId
	route string   // "POST /api/profile-import"
	segs  []string // path segments after /api
	body  []byte
	now   time.Time
	base  string // scheme://host, for links
	// modelled: op is not in the embedded spec but modelled on Klaviyo's
	// API reference (lists.go); its handler checks the request itself.
	modelled bool
}

// apiError is one item of Klaviyo's error document.
type apiError struct {
	ID     string         `json:"id"`
	Status int            `json:"status"`
	Code   string         `json:"code"`
	Title  string         `json:"title"`
	Detail string         `json:"detail"`
	Source map[string]any `json:"source,omitempty"`
	Meta   map[string]any `json:"meta,omitempty"`
}

var revisionRE = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})(\.[a-z0-9]+)?$`)

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; len(p) > len("/api/") && strings.HasSuffix(p, "/") {
		// Klaviyo's own links end in "/" (links.self, and links.next as
		// ".../api/profiles/?page[cursor]=..."); its API answers them as
		// the spec's paths, which have none.
		u := *r.URL
		u.Path, u.RawPath = strings.TrimSuffix(p, "/"), ""
		r2 := *r
		r2.URL = &u
		r = &r2
	}
	segs := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/api"), "/"), "/")
	c := &call{w: w, r: r, segs: segs, base: "http://" + r.Host}
	c.route = routeOf(r.Method, segs)
	if s.validator != nil {
		c.op, _ = s.validator.Operation(r)
	}
	if c.op == "" {
		c.op = modelledOp(r.Method, segs)
		c.modelled = c.op != ""
	}
	s.mu.Lock()
	s.stats.Requests++
	s.stats.ByRoute[c.route]++
	s.mu.Unlock()

	if d := s.opts.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if s.opts.RedirectTo != "" {
		s.count(http.StatusTemporaryRedirect)
		http.Redirect(w, r, strings.TrimRight(s.opts.RedirectTo, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		return
	}
	c.now = s.clock.Now()
	key, ok := s.authorized(r)
	if !ok {
		s.fail(c, http.StatusUnauthorized, "not_authenticated", "Authentication credentials were not provided.",
			"Missing or invalid private key.", nil)
		return
	}
	if s.refuseForStanding(c) {
		return
	}
	rev := r.Header.Get("revision")
	if m := revisionRE.FindStringSubmatch(rev); m == nil || m[1] > SpecRevision {
		s.fail(c, http.StatusBadRequest, "invalid_revision", "Invalid revision.",
			"The revision header must name a known API revision (YYYY-MM-DD), up to "+SpecRevision+".", map[string]any{"parameter": "revision"})
		return
	}
	if m := revisionRE.FindStringSubmatch(rev); m[1] < FirstRevision {
		// Klaviyo serves each operation from the revision it appeared in;
		// asked for an earlier one it answers 404 "No valid revisions found
		// for method" (seen live, klaviyo/klaviyo-swift-sdk#730). None of
		// the operations is older than the first revision.
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "No valid revisions found for method.", nil)
		return
	}

	s.mu.Lock()
	s.advanceLocked(c.now)
	retry, limit, remaining, reset := s.takeSlotLocked(key, c.op, c.now)
	inj429 := s.opts.RateLimitRate > 0 && s.rng.Float64() < s.opts.RateLimitRate
	inj503 := s.opts.ErrorRate > 0 && s.rng.Float64() < s.opts.ErrorRate
	s.mu.Unlock()
	if inj429 && retry == 0 {
		retry = 1
	}
	if retry > 0 {
		s.mu.Lock()
		s.stats.RateLimited++
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		s.fail(c, http.StatusTooManyRequests, "throttled", "Request was throttled.",
			fmt.Sprintf("Request was throttled. Expected available in %d second%s.", retry, plural(retry)), nil)
		return
	}
	if limit > 0 && s.opts.EnforceRateLimits {
		// Unenforced limits are not announced: a client pacing itself by
		// them would measure its pacing, not the fake.
		w.Header().Set("RateLimit-Limit", strconv.Itoa(limit))
		w.Header().Set("RateLimit-Remaining", strconv.Itoa(remaining))
		w.Header().Set("RateLimit-Reset", strconv.Itoa(reset))
	}
	if inj503 {
		s.fail(c, http.StatusServiceUnavailable, "service_unavailable", "Service unavailable.",
			"The service is temporarily unavailable; try again later.", nil)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		s.fail(c, http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large.",
			"The request body could not be read or is too large.", nil)
		return
	}
	c.body = body
	if s.opts.Validate && !c.modelled {
		if s.validator == nil {
			s.fail(c, http.StatusInternalServerError, "error", "Spec not loaded.", s.specErr.Error(), nil)
			return
		}
		var rb []byte
		if len(body) > 0 {
			rb = body
		}
		if err := s.validator.ValidateRequest(r, rb); err != nil {
			s.mu.Lock()
			s.stats.Invalid++
			s.mu.Unlock()
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", err.Error(), nil)
			return
		}
	}
	held := s.holdWrite(c)
	s.route(c)
	if held {
		s.mu.Lock()
		s.stats.HeldPending--
		s.mu.Unlock()
	}
}

// holdWrite holds a write request for HoldWrite, with probability
// HoldWriteRate, without watching its client, and reports whether it did
// (Options.HoldWriteRate).
func (s *Server) holdWrite(c *call) bool {
	if s.opts.HoldWriteRate <= 0 || s.opts.HoldWrite <= 0 {
		return false
	}
	switch c.r.Method {
	case http.MethodPost, http.MethodPatch, http.MethodDelete:
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

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (s *Server) route(c *call) {
	m, g := c.r.Method, c.segs
	switch {
	case len(g) == 1 && g[0] == "profile-import" && m == http.MethodPost:
		s.profileImport(c)
	case len(g) == 1 && g[0] == "profiles" && m == http.MethodPost:
		s.createProfile(c)
	case len(g) == 1 && g[0] == "profiles" && m == http.MethodGet:
		s.getProfiles(c)
	case len(g) == 2 && g[0] == "profiles" && m == http.MethodGet:
		s.getProfile(c, g[1])
	case len(g) == 2 && g[0] == "profiles" && m == http.MethodPatch:
		s.patchProfile(c, g[1])
	case len(g) == 4 && g[0] == "profiles" && g[2] == "relationships" && g[3] == "lists" && m == http.MethodGet:
		s.profileLists(c, g[1])
	case len(g) == 1 && g[0] == "profile-bulk-import-jobs" && m == http.MethodPost:
		s.createJob(c)
	case len(g) == 1 && g[0] == "profile-bulk-import-jobs" && m == http.MethodGet:
		s.listJobs(c)
	case len(g) == 2 && g[0] == "profile-bulk-import-jobs" && m == http.MethodGet:
		s.getJob(c, g[1])
	case len(g) == 3 && g[0] == "profile-bulk-import-jobs" && g[2] == "import-errors" && m == http.MethodGet:
		s.jobErrors(c, g[1])
	case len(g) == 4 && g[0] == "profile-bulk-import-jobs" && g[2] == "relationships" && g[3] == "profiles" && m == http.MethodGet:
		s.jobProfileIDs(c, g[1])
	case len(g) == 1 && g[0] == "profile-subscription-bulk-delete-jobs" && m == http.MethodPost:
		s.unsubscribe(c)
	case c.op == opAddProfilesToList:
		s.addProfilesToList(c, g[1])
	case c.op == opRemoveProfilesFromList:
		s.removeProfilesFromList(c, g[1])
	case c.op == opGetList:
		s.getList(c, g[1])
	case c.op == opGetAccounts:
		s.getAccounts(c)
	case c.op == opGetListProfileIDs:
		s.listProfileIDs(c, g[1])
	default:
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "The fake Klaviyo does not implement "+c.route+".", nil)
	}
}

// routeOf names a request for Stats.ByRoute, ids templated.
func routeOf(method string, segs []string) string {
	out := make([]string, len(segs))
	for i, g := range segs {
		out[i] = g
		if i == 1 && (segs[0] == "profiles" || segs[0] == "profile-bulk-import-jobs" || segs[0] == "lists") {
			out[i] = "{id}"
		}
	}
	return method + " /api/" + strings.Join(out, "/")
}

// authorized returns the request's key (the account its rate limits count
// against) and whether it is accepted.
func (s *Server) authorized(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, authPrefix) {
		return "", false
	}
	key := strings.TrimSpace(strings.TrimPrefix(h, authPrefix))
	switch {
	case key == "":
		return "", false
	case s.opts.APIKey == "":
		return key, true
	case key == s.opts.APIKey || slices.Contains(s.opts.OtherAPIKeys, key):
		return s.opts.APIKey, true // rate limits are the account's
	}
	return "", false
}

// takeSlotLocked counts a request in its account's and operation's burst
// (1 s) and steady (1 min) fixed windows. retry > 0 means it is over one of
// them: wait that many seconds (the window's end). limit, remaining and
// reset describe the steady window (0 limit: no documented limit).
func (s *Server) takeSlotLocked(key, op string, now time.Time) (retry, limit, remaining, reset int) {
	rl, ok := s.limits[op]
	if !ok {
		return 0, 0, 0, 0
	}
	k := key + "\x00" + op
	win := s.win[k]
	if win == nil {
		win = &window{}
		s.win[k] = win
	}
	bs, ss := now.Truncate(time.Second), now.Truncate(time.Minute)
	if !win.burstStart.Equal(bs) {
		win.burstStart, win.burst = bs, 0
	}
	if !win.steadyStart.Equal(ss) {
		win.steadyStart, win.steady = ss, 0
	}
	secs := func(end time.Time) int { return max(1, int(math.Ceil(end.Sub(now).Seconds()))) }
	if s.opts.EnforceRateLimits {
		switch {
		case win.steady >= rl.Steady:
			return secs(ss.Add(time.Minute)), rl.Steady, 0, 0
		case win.burst >= rl.Burst:
			return secs(bs.Add(time.Second)), rl.Steady, 0, 0
		}
	}
	win.burst++
	win.steady++
	return 0, rl.Steady, max(0, rl.Steady-win.steady), secs(ss.Add(time.Minute))
}

func (s *Server) count(status int) {
	s.mu.Lock()
	s.stats.ByStatus[strconv.Itoa(status)]++
	s.mu.Unlock()
}

// fail answers Klaviyo's error document.
func (s *Server) fail(c *call, status int, code, title, detail string, source map[string]any) {
	s.failMeta(c, status, code, title, detail, source, nil)
}

func (s *Server) failMeta(c *call, status int, code, title, detail string, source, meta map[string]any) {
	s.mu.Lock()
	id := s.st.newID("E")
	s.mu.Unlock()
	s.respond(c, status, map[string]any{"errors": []apiError{{ID: id, Status: status, Code: code, Title: title,
		Detail: detail, Source: source, Meta: meta}}})
}

// respond writes a JSON:API answer (no body when v is nil), checking it
// against the spec when asked.
func (s *Server) respond(c *call, status int, v any) {
	s.count(status)
	var b []byte
	if v != nil {
		var err error
		if b, err = json.Marshal(v); err != nil {
			status, b = http.StatusInternalServerError, []byte(`{"errors":[{"id":"x","code":"error","title":"Encoding.","detail":"the fake could not encode its answer"}]}`)
		}
		c.w.Header().Set("Content-Type", jsonAPI)
	}
	if s.opts.ValidateResponses && s.validator != nil && c.op != "" && !c.modelled {
		h := c.w.Header().Clone()
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", jsonAPI)
		}
		if err := s.validator.ValidateResponse(c.r, status, h, b); err != nil {
			s.mu.Lock()
			s.stats.SpecErrors++
			s.specErrs = append(s.specErrs, err)
			s.mu.Unlock()
		}
	}
	c.w.WriteHeader(status)
	if b != nil {
		_, _ = c.w.Write(b)
	}
}

// afterWrite runs after a write was applied: the AfterWrite hook, the slow
// answer, and perhaps a dropped one. It reports whether to answer.
func (s *Server) afterWrite(c *call) bool {
	if s.opts.AfterWrite != nil {
		s.opts.AfterWrite(c.r)
	}
	if d := s.opts.WriteLatency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.r.Context().Done():
			t.Stop()
			return false
		}
	}
	if s.opts.ErrorAfterWriteRate > 0 {
		s.mu.Lock()
		fail := s.rng.Float64() < s.opts.ErrorAfterWriteRate
		s.mu.Unlock()
		if fail {
			s.fail(c, http.StatusInternalServerError, "error", "A server error occurred.", "A server error occurred.", nil)
			return false
		}
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
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
	return false
}
