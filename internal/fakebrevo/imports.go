package fakebrevo

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the fake models of POST /contacts/import and GET /processes, and why:
//
//   - The import answers 202 with a processId as soon as the request is well
//     formed, as Brevo does; rows are judged later, by the process. A row
//     whose email is missing or invalid, or is one of Options.RefuseEmails,
//     or is picked by Options.ImportSkipRate, is skipped; so is a row whose
//     attributes.EXT_ID belongs to another contact. Nothing of a skipped row
//     is written.
//   - A process is queued for the first half of its delay and in_process for
//     the second (ProcessDelay, plus ImportRowDelay per row, so a large
//     import takes longer than a small one). Brevo documents neither the
//     order nor the concurrency of an account's imports; the fake processes
//     each import when its own delay is over (imports of one size finish in
//     the order they were sent), lazily: the first time it is touched after
//     the delay (any request, Stats or Contact), so tests with a fake clock
//     need no sleep.
//   - A completed process carries info.import: one URL per kind of problem,
//     null when the import had none, as Brevo's current reference
//     (developers.brevo.com/reference/get-process) documents it. swagger.yaml
//     predates it: info is beyond its getProcess schema (which does not
//     forbid extra properties). Each URL is a CSV report of the skipped rows
//     (EMAIL;EXT_ID;SMS, semicolon separated like Brevo's import files; Brevo
//     does not document the report's columns). The fake fills
//     invalid_emails, duplicate_ext_id and duplicate_phone_id (an SMS number
//     another contact holds: phone.go); the other kinds (duplicate_contact_id,
//     duplicate_email_id, duplicate_whatsapp_id,
//     duplicate_landline_number_id) are always null: the fake only stores
//     contacts with an email, and a repeated email within one import is
//     applied twice, the later row winning.
//   - Reports are served by the fake under ReportPath on its own origin, or,
//     with Options.ReportBaseURL, on another origin (run Server.Reports
//     there), as Brevo serves them from its file storage: a client must not
//     send its api-key there. They need no api-key.
//   - A process can fail whole (Options.ImportFailRate): status "failed",
//     nothing of it applied, no info. Brevo's current reference lists failed
//     (and cancelled) among the statuses and says failed processes carry
//     "error details" without documenting their shape, so the fake sends
//     none. swagger.yaml's enum lacks failed; the validator's copy of the
//     spec is patched to accept it in responses (see loadSpec).

// Import report kinds (getProcess.info.import) the fake fills.
const (
	ReportInvalidEmails    = "invalid_emails"
	ReportDuplicateExtID   = "duplicate_ext_id"
	ReportDuplicatePhoneID = "duplicate_phone_id"
)

// ReportPath is where the fake serves import reports on its own origin:
// ReportPath/{processId}/{kind}.csv.
const ReportPath = "/_reports"

// extIDAttribute is the attribute that carries a contact's ext_id in an
// import (Brevo's import files take EXT_ID as a column) and in the contact
// the fake returns.
const extIDAttribute = "EXT_ID"

type process struct {
	id      int64
	created time.Time
	readyAt time.Time
	done    bool // processed: completed, or failed
	failed  bool // decided when the import is accepted (ImportFailRate)
	job     *importJob
	// reports holds the rows the process skipped, by report kind.
	reports map[string][]reportRow
}

type importJob struct {
	rows           []importRow
	listIDs        []int64
	updateExisting bool
	emptyAttrs     bool
	emailBlacklist bool
	smsBlacklist   bool
}

type importRow struct {
	email string
	extID string
	// hasExtID: the row has an EXT_ID column, empty or not. An empty one
	// erases the contact's ext_id under emptyContactsAttributes, as it
	// does any attribute: imports carry the identifier as this attribute.
	hasExtID bool
	attrs    map[string]any
	// skip is the report kind of a row skipped whatever the account holds
	// (an invalid or refused address, an injected skip); "" otherwise.
	skip string
}

type reportRow struct{ email, extID, sms string }

type importRequest struct {
	FileURL  *string           `json:"fileUrl"`
	FileBody *string           `json:"fileBody"`
	JSONBody []json.RawMessage `json:"jsonBody"`
	ListIDs  []int64           `json:"listIds"`
	NewList  *struct {
		ListName string `json:"listName"`
		FolderID int64  `json:"folderId"`
	} `json:"newList"`
	EmailBlacklist          bool  `json:"emailBlacklist"`
	SMSBlacklist            bool  `json:"smsBlacklist"`
	UpdateExistingContacts  *bool `json:"updateExistingContacts"`
	EmptyContactsAttributes bool  `json:"emptyContactsAttributes"`
}

type importRowJSON struct {
	Email      *string        `json:"email"`
	Attributes map[string]any `json:"attributes"`
}

// MaxJSONBodyBytes is the largest jsonBody of an import Brevo takes.
const MaxJSONBodyBytes = 10_000_000

// jsonBodyBytes is the size of the jsonBody array as sent, without spaces.
func jsonBodyBytes(rows []json.RawMessage) int {
	n := 2 + max(len(rows)-1, 0)
	for _, r := range rows {
		n += len(r)
	}
	return n
}

// importContacts accepts an import and answers 202 with its process ID; the
// process judges the rows later (see the comment at the top of this file).
// Only a malformed request is refused (400).
func (s *Server) importContacts(c *call) {
	var req importRequest
	if err := decodeObject(c.body, &req); err != nil {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, msgInvalidJSON)
		return
	}
	if req.FileURL != nil || req.FileBody != nil {
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, "fileUrl and fileBody are not supported by the fake; send jsonBody")
		return
	}
	if req.JSONBody == nil {
		s.fail(c, http.StatusBadRequest, CodeMissingParameter, "fileUrl, fileBody or jsonBody is mandatory")
		return
	}
	if len(req.JSONBody) == 0 {
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, "jsonBody is empty")
		return
	}
	if n := jsonBodyBytes(req.JSONBody); n > MaxJSONBodyBytes {
		// Brevo's spec: "Maximum allowed json body size is 10MB" (read as
		// 10,000,000 bytes, the unkinder reading; oncesync sends at most 8 MB).
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, fmt.Sprintf("jsonBody is %d bytes: the maximum allowed json body size is 10MB", n))
		return
	}
	if len(req.ListIDs) == 0 && (req.NewList == nil || req.NewList.ListName == "") {
		s.fail(c, http.StatusBadRequest, CodeMissingParameter, "listIds or newList is mandatory")
		return
	}
	job := &importJob{
		rows:           make([]importRow, 0, len(req.JSONBody)),
		listIDs:        req.ListIDs,
		updateExisting: req.UpdateExistingContacts == nil || *req.UpdateExistingContacts,
		emailBlacklist: req.EmailBlacklist,
		smsBlacklist:   req.SMSBlacklist,
	}
	job.emptyAttrs = job.updateExisting && req.EmptyContactsAttributes
	for i, raw := range req.JSONBody {
		var row importRowJSON
		if err := decodeObject(raw, &row); err != nil {
			s.fail(c, http.StatusBadRequest, CodeInvalidParameter, fmt.Sprintf("jsonBody[%d] must be an object", i))
			return
		}
		r := importRow{attrs: normAttrs(row.Attributes)}
		if row.Email != nil {
			r.email = normEmail(*row.Email)
		}
		if v, ok := r.attrs[extIDAttribute]; ok {
			delete(r.attrs, extIDAttribute)
			r.extID, r.hasExtID = scalarString(v), true
		}
		if !validEmail(r.email) || s.refuse[r.email] {
			r.skip = ReportInvalidEmails
		}
		job.rows = append(job.rows, r)
	}

	s.mu.Lock()
	st := s.st
	if req.NewList != nil && req.NewList.ListName != "" {
		id, ok := st.lists[req.NewList.ListName]
		if !ok {
			id = st.nextListID
			st.nextListID++
			st.lists[req.NewList.ListName] = id
		}
		job.listIDs = append(slices.Clone(job.listIDs), id)
	}
	// Draw from the seeded source only when a rate is set, so that other
	// faults stay reproducible for a given seed.
	if rate := s.opts.ImportSkipRate; rate > 0 {
		for i := range job.rows {
			if job.rows[i].skip == "" && s.rng.Float64() < rate {
				job.rows[i].skip = ReportInvalidEmails
			}
		}
	}
	failed := s.opts.ImportFailRate > 0 && s.rng.Float64() < s.opts.ImportFailRate
	delay := s.opts.ProcessDelay + time.Duration(len(job.rows))*s.opts.ImportRowDelay
	p := &process{id: st.nextProcessID, created: c.now, readyAt: c.now.Add(delay), failed: failed, job: job}
	st.nextProcessID++
	st.processes = append(st.processes, p)
	i, _ := slices.BinarySearchFunc(st.queue, p, byReadiness)
	st.queue = slices.Insert(st.queue, i, p)
	s.advanceLocked(c.now)
	s.mu.Unlock()

	if !s.afterWrite(c) {
		return
	}
	s.respond(c, http.StatusAccepted, map[string]int64{"processId": p.id})
}

func byReadiness(a, b *process) int {
	if c := a.readyAt.Compare(b.readyAt); c != 0 {
		return c
	}
	return cmpInt(a.id, b.id)
}

// scalarString is an attribute value as text (EXT_ID may come as a number).
func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// advanceLocked processes, in order, the queued imports that are due at now.
func (s *Server) advanceLocked(now time.Time) {
	st := s.st
	for len(st.queue) > 0 && !st.queue[0].readyAt.After(now) {
		p := st.queue[0]
		st.queue = st.queue[1:]
		s.processLocked(p)
	}
}

// processLocked runs an import process: it fails whole, or applies its rows
// and reports the ones it skipped.
func (s *Server) processLocked(p *process) {
	job, now := p.job, p.readyAt
	p.job, p.done = nil, true
	if p.failed {
		s.stats.ImportsFailed++
		return
	}
	st := s.st
	for _, row := range job.rows {
		kind := row.skip
		if kind == "" && row.extID != "" {
			if other := st.byExtID[row.extID]; other != nil && other.email != row.email {
				kind = ReportDuplicateExtID
			}
		}
		sms := normSMS(row.attrs)
		if kind == "" {
			if other := st.smsOwner(sms, st.byEmail[row.email]); other != nil {
				kind = ReportDuplicatePhoneID // phone.go
			}
		}
		if kind != "" {
			if p.reports == nil {
				p.reports = make(map[string][]reportRow)
			}
			p.reports[kind] = append(p.reports[kind], reportRow{email: row.email, extID: row.extID, sms: sms})
			s.stats.ImportRowsSkipped++
			continue
		}
		attrs := make(map[string]any, len(row.attrs))
		for k, v := range row.attrs {
			switch {
			case !isEmpty(v):
				attrs[k] = v
			case job.emptyAttrs:
				attrs[k] = nil // erase
			}
		}
		wr := contactWrite{attrs: attrs, addLists: job.listIDs, via: fmt.Sprintf("import process %d", p.id)}
		if row.extID != "" || (row.hasExtID && job.emptyAttrs) {
			wr.extID = &row.extID
		}
		if job.emailBlacklist {
			wr.emailBL = &job.emailBlacklist
		}
		if job.smsBlacklist {
			wr.smsBL = &job.smsBlacklist
		}
		if existing := st.byEmail[row.email]; existing != nil {
			if job.updateExisting {
				s.writeLocked(existing, wr, now)
			}
			continue
		}
		for k, v := range wr.attrs {
			if v == nil {
				delete(wr.attrs, k)
			}
		}
		s.createLocked(row.email, wr, now)
	}
}

// processJSON is getProcess. Info goes beyond swagger.yaml (see the top of
// this file).
type processJSON struct {
	ID     int64        `json:"id"`
	Status string       `json:"status"`
	Name   string       `json:"name"`
	Info   *processInfo `json:"info,omitempty"`
}

type processInfo struct {
	Import importInfo `json:"import"`
}

// importInfo holds one report URL per kind of problem, null when none.
type importInfo struct {
	InvalidEmails             *string `json:"invalid_emails"`
	DuplicateContactID        *string `json:"duplicate_contact_id"`
	DuplicateExtID            *string `json:"duplicate_ext_id"`
	DuplicateEmailID          *string `json:"duplicate_email_id"`
	DuplicatePhoneID          *string `json:"duplicate_phone_id"`
	DuplicateWhatsappID       *string `json:"duplicate_whatsapp_id"`
	DuplicateLandlineNumberID *string `json:"duplicate_landline_number_id"`
}

func (s *Server) processJSONLocked(p *process, now time.Time, reportBase string) processJSON {
	out := processJSON{ID: p.id, Status: ProcessQueued, Name: ProcessNameImport}
	switch {
	case p.done && p.failed:
		out.Status = ProcessFailed
	case p.done:
		out.Status = ProcessCompleted
		report := func(kind string) *string {
			if len(p.reports[kind]) == 0 {
				return nil
			}
			u := fmt.Sprintf("%s/%d/%s.csv", reportBase, p.id, kind)
			return &u
		}
		out.Info = &processInfo{Import: importInfo{
			InvalidEmails:    report(ReportInvalidEmails),
			DuplicateExtID:   report(ReportDuplicateExtID),
			DuplicatePhoneID: report(ReportDuplicatePhoneID),
		}}
	case !now.Before(p.created.Add(p.readyAt.Sub(p.created) / 2)):
		out.Status = ProcessInProcess
	}
	return out
}

// reportBase is the root of the report URLs published in answer to r.
func (s *Server) reportBase(r *http.Request) string {
	if s.opts.ReportBaseURL != "" {
		return strings.TrimRight(s.opts.ReportBaseURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + ReportPath
}

func (s *Server) findProcessLocked(id int64) *process {
	if i, ok := slices.BinarySearchFunc(s.st.processes, id, func(p *process, id int64) int { return cmpInt(p.id, id) }); ok {
		return s.st.processes[i]
	}
	return nil
}

func (s *Server) getProcess(c *call) {
	id, err := strconv.ParseInt(c.segs[1], 10, 64)
	if err != nil {
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, msgProcessNotFound)
		return
	}
	base := s.reportBase(c.r)
	s.mu.Lock()
	var out *processJSON
	if p := s.findProcessLocked(id); p != nil {
		pj := s.processJSONLocked(p, c.now, base)
		out = &pj
	}
	s.mu.Unlock()
	if out == nil {
		// The spec's example for this 404 uses invalid_parameter.
		s.fail(c, http.StatusNotFound, CodeInvalidParameter, msgProcessNotFound)
		return
	}
	s.respond(c, http.StatusOK, out)
}

func (s *Server) listProcesses(c *call) {
	q := c.r.URL.Query()
	limit, e := intParam(q, "limit", 10, 0, 50)
	var offset int
	if e == nil {
		offset, e = intParam(q, "offset", 0, 0, math.MaxInt32)
	}
	var desc bool
	if e == nil {
		desc, e = sortParam(q)
	}
	if e != nil {
		s.fail(c, http.StatusBadRequest, e.Code, e.Message)
		return
	}
	base := s.reportBase(c.r)
	s.mu.Lock()
	all := s.st.processes
	page := make([]processJSON, 0, min(limit, len(all)))
	for i := offset; i < len(all) && len(page) < limit; i++ {
		p := all[i]
		if desc {
			p = all[len(all)-1-i]
		}
		page = append(page, s.processJSONLocked(p, c.now, base))
	}
	count := len(all)
	s.mu.Unlock()
	s.respond(c, http.StatusOK, struct {
		Processes []processJSON `json:"processes"`
		Count     int           `json:"count"`
	}{page, count})
}

// Reports returns a handler that serves only the import reports, under the
// path of Options.ReportBaseURL (ReportPath when unset). Serve it on another
// listener, with ReportBaseURL pointing there, to publish reports on another
// origin than the API's, as Brevo does.
func (s *Server) Reports() http.Handler {
	prefix := ReportPath
	if s.opts.ReportBaseURL != "" {
		if u, err := url.Parse(s.opts.ReportBaseURL); err == nil {
			prefix = strings.TrimRight(u.Path, "/")
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix+"/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		s.serveReport(w, r, rest)
	})
}

// serveReport answers GET {processId}/{kind}.csv with the rows the process
// skipped, semicolon separated with a header row.
func (s *Server) serveReport(w http.ResponseWriter, r *http.Request, rest string) {
	if r.Method != http.MethodGet {
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	idText, file, ok := strings.Cut(rest, "/")
	kind, isCSV := strings.CutSuffix(file, ".csv")
	id, err := strconv.ParseInt(idText, 10, 64)
	if !ok || !isCSV || err != nil {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.advanceLocked(s.clock.Now())
	var rows []reportRow
	if p := s.findProcessLocked(id); p != nil {
		rows = slices.Clone(p.reports[kind])
	}
	if len(rows) > 0 {
		s.stats.ReportRequests++
	}
	s.mu.Unlock()
	if len(rows) == 0 {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	cw := csv.NewWriter(w)
	cw.Comma = ';'
	_ = cw.Write([]string{"EMAIL", extIDAttribute, smsAttribute})
	for _, row := range rows {
		_ = cw.Write([]string{row.email, row.extID, row.sms})
	}
	cw.Flush()
}
