package main

import (
	"context"
	"net"
	"net/http"
	"net/url"
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
// lets a scenario intercept requests or inject faults.
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
}

type syncKey struct{}

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
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
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
	if !strings.HasPrefix(esc, "/s/") {
		d.fake.ServeHTTP(w, r) // /_stats and friends
		return
	}
	rest := esc[len("/s/"):]
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		http.NotFound(w, r)
		return
	}
	syncID, esc := rest[:i], rest[i:]
	path, err := url.PathUnescape(esc)
	if err != nil {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	r2 := r.WithContext(context.WithValue(r.Context(), syncKey{}, syncID))
	u := *r.URL
	u.Path, u.RawPath = path, esc
	r2.URL = &u

	arrived := time.Now()
	d.mu.Lock()
	ic, f := d.intercept, d.fault
	d.mu.Unlock()
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
	sw := &statusWriter{ResponseWriter: w}
	d.fake.ServeHTTP(sw, r2)
	// 0: the fake cut the connection after applying the write.
	if isWrite(r2, path) && (sw.status == 0 || sw.status/100 == 2) {
		d.mu.Lock()
		d.writes[syncID] = append(d.writes[syncID], arrived)
		d.nwrites[syncID]++
		d.mu.Unlock()
	}
}
