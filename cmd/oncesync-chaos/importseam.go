package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// importSeam makes the fake's contact import behave as Brevo documents it,
// in front of a fake that does not yet (internal/fakebrevo refuses a bad
// import whole with a 400, and its processes never fail):
//
//   - POST /v3/contacts/import always answers 202 with a process id. Rows
//     refused for their content are skipped by the process, not refused by
//     the request: the seam strips them before the fake sees the import,
//     and the completed process names them in info.import.invalid_emails (a
//     URL to a CSV report, as Brevo's GET /processes/{id} and its listing,
//     GET /processes, do).
//   - A process can fail whole: the seam answers 202 with a process id of
//     its own, applies nothing, and reports the process failed once its
//     delay has passed (queued for the first half, in_process the second).
//
// The fake's own ProcessDelay delays the imports it applies. Once the fake
// models skipped rows, reports and failed processes itself (the brevo-async
// change), this seam should shrink to choosing which rows and which
// processes; the checks of async-import-faults do not depend on it.
type importSeam struct {
	delay  time.Duration // how long an own (failed) process stays queued/in_process
	prefix string        // the router's base URL, for report links

	mu      sync.Mutex
	refuse  func(email string) bool // rows the import skips
	failAt  map[int]bool            // 1-based import ordinals that fail whole
	n       int                     // imports seen
	nextOwn int64
	procs   map[int64]*seamProc
	order   []int64 // every import's process id, oldest first (GET /v3/processes)
	// Counters for the notes.
	skippedRows, failedProcs, failedRows int
}

// seamProc is a process the seam knows of: one of the fake's whose import
// skipped rows, or one of its own that failed.
type seamProc struct {
	failed  bool // one of the seam's own, failed whole
	created time.Time
	skipped []string
}

// ownProcessBase keeps the seam's process ids clear of the fake's.
const ownProcessBase = 1 << 40

func newImportSeam(prefix string, delay time.Duration) *importSeam {
	return &importSeam{delay: delay, prefix: prefix, nextOwn: ownProcessBase, procs: map[int64]*seamProc{}, failAt: map[int]bool{}}
}

// setRefused sets the rows the import skips (nil: none).
func (m *importSeam) setRefused(f func(string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refuse = f
}

// setFailAt makes the imports with these 1-based ordinals (counted from
// the first import the seam saw) fail whole.
func (m *importSeam) setFailAt(ordinals ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAt = map[int]bool{}
	for _, o := range ordinals {
		m.failAt[o] = true
	}
}

func (m *importSeam) imports() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

func (m *importSeam) counters() (skippedRows, failedProcs, failedRows int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.skippedRows, m.failedProcs, m.failedRows
}

// serve handles the routes the seam changes and reports whether it did.
func (m *importSeam) serve(w http.ResponseWriter, r *http.Request, path string, fake *fakebrevo.Server) bool {
	switch {
	case r.Method == http.MethodPost && path == "/v3/contacts/import":
		return m.importContacts(w, r, fake)
	case r.Method == http.MethodGet && path == "/v3/processes":
		return m.listProcesses(w, r, fake)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/v3/processes/"):
		id, err := strconv.ParseInt(strings.TrimPrefix(path, "/v3/processes/"), 10, 64)
		if err != nil {
			return false
		}
		return m.getProcess(w, r, id, fake)
	}
	return false
}

func (m *importSeam) importContacts(w http.ResponseWriter, r *http.Request, fake *fakebrevo.Server) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req map[string]json.RawMessage
	var rows []json.RawMessage
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(req["jsonBody"], &rows) != nil || len(rows) == 0 {
		return false // let the fake judge a malformed request
	}
	m.mu.Lock()
	m.n++
	fail := m.failAt[m.n]
	refuse := m.refuse
	m.mu.Unlock()
	var keep []json.RawMessage
	var skipped []string
	for _, raw := range rows {
		var row struct {
			Email string `json:"email"`
		}
		_ = json.Unmarshal(raw, &row)
		if e := strings.ToLower(strings.TrimSpace(row.Email)); refuse != nil && e != "" && refuse(e) {
			skipped = append(skipped, e)
			continue
		}
		keep = append(keep, raw)
	}
	if fail || len(keep) == 0 {
		// A failed process applies nothing. Brevo accepts an import whose
		// every row it will skip, which the fake refuses: the seam answers
		// both itself.
		m.mu.Lock()
		id := m.nextOwn
		m.nextOwn++
		m.procs[id] = &seamProc{failed: fail, created: time.Now(), skipped: skipped}
		m.order = append(m.order, id)
		if fail {
			m.failedProcs++
			m.failedRows += len(rows)
		} else {
			m.skippedRows += len(skipped)
		}
		m.mu.Unlock()
		writeJSONBody(w, http.StatusAccepted, map[string]int64{"processId": id})
		return true
	}
	if len(skipped) > 0 {
		req["jsonBody"], _ = json.Marshal(keep)
		nb, _ := json.Marshal(req)
		r.Body = io.NopCloser(bytes.NewReader(nb))
		r.ContentLength = int64(len(nb))
		r.Header.Set("Content-Length", strconv.Itoa(len(nb)))
	}
	cw := &captureWriter{ResponseWriter: w}
	fake.ServeHTTP(cw, r)
	var created struct {
		ProcessID int64 `json:"processId"`
	}
	if cw.status/100 == 2 && json.Unmarshal(cw.buf.Bytes(), &created) == nil && created.ProcessID > 0 {
		m.mu.Lock()
		m.order = append(m.order, created.ProcessID)
		if len(skipped) > 0 {
			m.procs[created.ProcessID] = &seamProc{created: time.Now(), skipped: skipped}
			m.skippedRows += len(skipped)
		}
		m.mu.Unlock()
	}
	return true
}

// listProcesses answers GET /v3/processes as Brevo documents it (newest
// first unless sort=asc, limit and offset), from the imports the seam saw,
// each as GET /v3/processes/{id} answers for it: a listing and a read by id
// never disagree (developers.brevo.com/reference/get-processes: a completed
// import's entry carries its reports).
func (m *importSeam) listProcesses(w http.ResponseWriter, r *http.Request, fake *fakebrevo.Server) bool {
	q := r.URL.Query()
	limit, offset := 10, 0
	if v := q.Get("limit"); v != "" {
		limit, _ = strconv.Atoi(v)
	}
	if v := q.Get("offset"); v != "" {
		offset, _ = strconv.Atoi(v)
	}
	m.mu.Lock()
	ids := slices.Clone(m.order)
	m.mu.Unlock()
	if q.Get("sort") != "asc" {
		slices.Reverse(ids)
	}
	out := []any{}
	for i := offset; i < len(ids) && len(out) < limit; i++ {
		byID := r.Clone(r.Context())
		byID.URL.Path, byID.URL.RawPath, byID.URL.RawQuery = "/v3/processes/"+strconv.FormatInt(ids[i], 10), "", ""
		if p, ok := m.process(byID, ids[i], fake); ok {
			out = append(out, p)
		}
	}
	writeJSONBody(w, http.StatusOK, map[string]any{"processes": out, "count": len(ids)})
	return true
}

// getProcess answers for the seam's own processes and adds the skipped
// rows' report to the fake's; other processes are the fake's alone.
func (m *importSeam) getProcess(w http.ResponseWriter, r *http.Request, id int64, fake *fakebrevo.Server) bool {
	m.mu.Lock()
	_, ok := m.procs[id]
	m.mu.Unlock()
	if !ok {
		return false
	}
	out, ok := m.process(r, id, fake)
	if !ok {
		return false
	}
	writeJSONBody(w, http.StatusOK, out)
	return true
}

// process is what GET /v3/processes/{id} (r) answers for process id.
func (m *importSeam) process(r *http.Request, id int64, fake *fakebrevo.Server) (map[string]any, bool) {
	m.mu.Lock()
	p, ok := m.procs[id]
	m.mu.Unlock()
	if !ok {
		p = &seamProc{}
	}
	out := map[string]any{"id": id, "name": fakebrevo.ProcessNameImport}
	if id >= ownProcessBase {
		age := time.Since(p.created)
		switch {
		case age < m.delay/2:
			out["status"] = fakebrevo.ProcessQueued
		case age < m.delay:
			out["status"] = fakebrevo.ProcessInProcess
		case p.failed:
			out["status"] = "failed"
		default:
			out["status"] = fakebrevo.ProcessCompleted
		}
	} else {
		rec := httptest.NewRecorder()
		fake.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			return nil, false
		}
	}
	if out["status"] == fakebrevo.ProcessCompleted && len(p.skipped) > 0 && !p.failed {
		out["info"] = map[string]any{"import": map[string]any{
			"invalid_emails":       fmt.Sprintf("%s/_chaos/import-reports/%d/invalid_emails.csv", m.prefix, id),
			"duplicate_contact_id": nil, "duplicate_ext_id": nil, "duplicate_email_id": nil,
		}}
	}
	return out, true
}

// report serves GET /_chaos/import-reports/{id}/invalid_emails.csv: the
// skipped rows' addresses, one a line under an EMAIL header.
func (m *importSeam) report(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 4 || parts[3] != "invalid_emails.csv" {
		http.NotFound(w, r)
		return
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	m.mu.Lock()
	p, ok := m.procs[id]
	var skipped []string
	if ok {
		skipped = append(skipped, p.skipped...)
	}
	m.mu.Unlock()
	if err != nil || !ok {
		http.NotFound(w, r)
		return
	}
	sort.Strings(skipped)
	w.Header().Set("Content-Type", "text/csv")
	_, _ = io.WriteString(w, "EMAIL\n"+strings.Join(skipped, "\n")+"\n")
}

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// captureWriter passes a response through and keeps a copy of its body.
type captureWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets the fake hijack the connection (dropped responses).
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
