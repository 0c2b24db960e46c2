package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// fault is a destination-wide fault the router injects in front of the fake
// (the fake's own Options inject random faults for the whole scenario).
type fault struct {
	Status int           // answer every /v3 request with it (503, 429), never reaching the fake
	Delay  time.Duration // add to every /v3 request
}

// dest is the fake Brevo behind a router that gives every sync its own base
// URL (/s/<sync>/v3), so the runner knows which sync each request is for: it
// records when each sync's writes arrived (progress, for resume latency), and
// lets a scenario intercept requests or inject faults. The account URL
// (/a/v3, AccountURL) is one base URL for every sync, as one Brevo account
// is: oncesync then paces them all as one account, and the router tells the
// syncs apart by the sync ID in the records' e-mail addresses instead.
type dest struct {
	fake *fakebrevo.Server
	srv  *http.Server
	base string

	mu        sync.Mutex
	writes    map[string][]time.Time // per sync: arrival of every write the fake accepted
	nwrites   map[string]int
	intercept func(syncID string, w http.ResponseWriter, r *http.Request) bool
	after     func(syncID string)
	fault     fault
	// pidTags maps a process (its pid) to the tag its writes carry
	// (tagPID, connowner.go).
	pidTags map[int]string
	landed  []landing
	refused func(email string) bool // POST /contacts answered 400 for these
	imports *importSeam             // nil: imports go to the fake as they are
	// calls are the answers to /v3/contacts* requests, the group the
	// fake's RateLimitPerSecond limits, in arrival order; inFlight counts
	// the requests the fake is serving now.
	calls    []contactCall
	inFlight int
	// active counts, per sync, the requests whose headers arrived and whose
	// answer is not written yet (a body may still be on its way).
	active map[string]int
}

// contactCall is one /v3/contacts* request and the fake's answer.
type contactCall struct {
	At     time.Time
	Status int // 0: the fake cut the connection after the write
}

// landing is one write the router handed on (to the fake, which applied it
// then, or to the import seam).
type landing struct {
	SyncID  string
	Tag     string // the client's tag ("" for the shared key)
	Arrived time.Time
	Landed  time.Time
}

type syncKey struct{}

// tagKey is the context key of the client tag.
type tagKey struct{}

// landings are the writes landed after t by clients tagged tag.
func (d *dest) landings(tag string, after time.Time) []landing {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []landing
	for _, l := range d.landed {
		if l.Tag == tag && l.Landed.After(after) {
			out = append(out, l)
		}
	}
	return out
}

// useImportSeam puts an importSeam in front of the fake's imports (delay:
// how long the seam's own processes run) and returns it.
func (d *dest) useImportSeam(delay time.Duration) *importSeam {
	m := newImportSeam(d.base, delay)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.imports = m
	return m
}

// setRefused makes POST /contacts answer 400 (refused for its content, as
// Brevo does for an address it will not take) for every e-mail f returns
// true for; nil accepts all.
func (d *dest) setRefused(f func(email string) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refused = f
}

// newDest starts the fake on a loopback port. Validation stays off (speed):
// the e2e tests check every request against Brevo's spec; here the fake
// counts duplicate writes, which is all the checker needs.
func (e *env) newDest(opts fakebrevo.Options) (*dest, error) {
	d := &dest{writes: map[string][]time.Time{}, nwrites: map[string]int{}}
	opts.APIKey = apiKey
	opts.Validate = false
	if opts.Seed == 0 {
		opts.Seed = e.o.Seed
	}
	opts.AfterWrite = func(r *http.Request) {
		d.mu.Lock()
		f := d.after
		d.mu.Unlock()
		if f != nil {
			id, _ := r.Context().Value(syncKey{}).(string)
			f(id)
		}
	}
	d.fake = fakebrevo.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.base = "http://" + ln.Addr().String()
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second, ConnContext: d.connContext}
	go func() { _ = d.srv.Serve(ln) }()
	e.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := d.srv.Shutdown(ctx); err != nil {
			_ = d.srv.Close()
		}
	})
	return d, nil
}

// URL is the Brevo base URL of syncID.
func (d *dest) URL(syncID string) string { return d.base + "/s/" + syncID + "/v3" }

// AccountURL is the one Brevo base URL of every sync on the shared account.
func (d *dest) AccountURL() string { return d.base + "/a/v3" }

// syncInBody finds the sync a request on the account URL is for: the
// cluster's sync IDs (c<6 hex>-s<nn>, c<6 hex>-p<nn>) start every record's
// e-mail address and ext_id.
var syncInBody = regexp.MustCompile(`c[0-9a-f]{6}-[sp][0-9]{2}`)

// attribute reads the sync ID of a request on the account URL from its
// path, else its body (restored for the fake); "" when neither names one
// (a GET of an import process).
func attribute(r *http.Request, path string) string {
	if id := syncInBody.FindString(path); id != "" {
		return id
	}
	if r.Body == nil {
		return ""
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	return string(syncInBody.Find(body))
}

// contactCalls counts the /v3/contacts* requests that arrived in [from,
// to) and those the fake answered 429.
func (d *dest) contactCalls(from, to time.Time) (n, limited int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.calls {
		if c.At.Before(from) || !c.At.Before(to) {
			continue
		}
		n++
		if c.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	return n, limited
}

// activeFor is how many requests of syncs have arrived (their headers) and
// not been answered yet.
func (d *dest) activeFor(syncs []string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, id := range syncs {
		n += d.active[id]
	}
	return n
}

// busy is how many requests the fake is serving now.
func (d *dest) busy() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFlight
}

func (d *dest) setIntercept(f func(syncID string, w http.ResponseWriter, r *http.Request) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.intercept = f
}

// setAfterWrite sets a hook called after the fake applied a write and before
// it answers (the in-doubt window).
func (d *dest) setAfterWrite(f func(syncID string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.after = f
}

func (d *dest) setFault(f fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fault = f
}

// writeCount is how many writes of syncID the fake accepted so far.
func (d *dest) writeCount(syncID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nwrites[syncID]
}

// firstWriteAfter is the arrival of syncID's first accepted write after t.
func (d *dest) firstWriteAfter(syncID string, t time.Time) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var best time.Time
	for _, at := range d.writes[syncID] {
		if at.After(t) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	return best, !best.IsZero()
}

// lastWrite is the arrival of syncID's last accepted write.
func (d *dest) lastWrite(syncID string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.writes[syncID]
	if len(w) == 0 {
		return time.Time{}, false
	}
	return w[len(w)-1], true
}

// holdOnTheWire keeps r from the fake for d, as a slow network would, and
// reports whether it may go on (false: its client gave it up meanwhile, so
// it never arrived). It reads the body first: only then does net/http notice
// a client that closes its connection.
func holdOnTheWire(r *http.Request, d time.Duration) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	}
}

// landAnyway keeps r from the fake for d, then lets it land even if its
// client gave it up meanwhile: a request whose body was sent may be applied
// by the vendor whatever its client does next. It detaches r's context in
// place, so the router that passes r on serves it whole.
func landAnyway(r *http.Request, d time.Duration) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	time.Sleep(d)
	*r = *r.WithContext(context.WithoutCancel(r.Context()))
}

func isWrite(r *http.Request, path string) bool {
	return (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.HasPrefix(path, "/v3/contacts")
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController hijack the connection (the fake's
// dropped responses).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (d *dest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	esc := r.URL.EscapedPath()
	d.mu.Lock()
	seam := d.imports
	d.mu.Unlock()
	if seam != nil && strings.HasPrefix(esc, "/_chaos/import-reports/") {
		seam.report(w, r)
		return
	}
	var syncID, path string
	switch {
	case strings.HasPrefix(esc, "/a/"):
		esc = esc[len("/a"):]
		p, err := url.PathUnescape(esc)
		if err != nil {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		path, syncID = p, attribute(r, p)
	case strings.HasPrefix(esc, "/s/"):
		rest := esc[len("/s/"):]
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		syncID, esc = rest[:i], rest[i:]
		p, err := url.PathUnescape(esc)
		if err != nil {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		path = p
	default:
		d.fake.ServeHTTP(w, r) // /_stats and friends
		return
	}
	d.mu.Lock()
	tag := d.tagOf(r.Context())
	ic, f, refused := d.intercept, d.fault, d.refused
	d.mu.Unlock()
	ctx := context.WithValue(r.Context(), syncKey{}, syncID)
	ctx = context.WithValue(ctx, tagKey{}, tag)
	r2 := r.WithContext(ctx)
	u := *r.URL
	u.Path, u.RawPath = path, esc
	r2.URL = &u

	arrived := time.Now()
	d.mu.Lock()
	if d.active == nil {
		d.active = map[string]int{}
	}
	d.active[syncID]++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.active[syncID]--
		d.mu.Unlock()
	}()
	if ic != nil && ic(syncID, w, r2) {
		return
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if f.Status != 0 {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		if f.Status == http.StatusTooManyRequests {
			h.Set(fakebrevo.HeaderRateLimitLimit, "10")
			h.Set(fakebrevo.HeaderRateLimitRemaining, "0")
			h.Set(fakebrevo.HeaderRateLimitReset, "1")
		}
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(`{"code":"` + strconv.Itoa(f.Status) + `","message":"chaos: injected by the router"}`))
		return
	}
	if refused != nil && r2.Method == http.MethodPost && path == "/v3/contacts" && refuseContact(w, r2, refused) {
		return
	}
	if isWrite(r2, path) {
		d.mu.Lock()
		d.landed = append(d.landed, landing{SyncID: syncID, Tag: tag, Arrived: arrived, Landed: time.Now()})
		d.mu.Unlock()
	}
	sw := &statusWriter{ResponseWriter: w}
	d.mu.Lock()
	d.inFlight++
	d.mu.Unlock()
	if seam == nil || !seam.serve(sw, r2, path, d.fake) {
		d.fake.ServeHTTP(sw, r2)
	}
	d.mu.Lock()
	d.inFlight--
	if strings.HasPrefix(path, "/v3/contacts") {
		d.calls = append(d.calls, contactCall{At: arrived, Status: sw.status})
	}
	d.mu.Unlock()
	// 0: the fake cut the connection after applying the write.
	if isWrite(r2, path) && (sw.status == 0 || sw.status/100 == 2) {
		d.mu.Lock()
		d.writes[syncID] = append(d.writes[syncID], arrived)
		d.nwrites[syncID]++
		d.mu.Unlock()
	}
}

// refuseContact answers 400 to a POST /contacts whose e-mail refused
// reports, as Brevo refuses a record for its content; it restores the body
// for the fake otherwise.
func refuseContact(w http.ResponseWriter, r *http.Request, refused func(string) bool) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var c struct {
		Email string `json:"email"`
	}
	if json.Unmarshal(body, &c) != nil || !refused(strings.ToLower(strings.TrimSpace(c.Email))) {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(`{"code":"invalid_parameter","message":"chaos: this contact is refused for its content (for now)"}`))
	return true
}
