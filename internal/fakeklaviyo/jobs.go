package fakeklaviyo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Job statuses (the spec's enum).
const (
	JobQueued     = "queued"
	JobProcessing = "processing"
	JobComplete   = "complete"
	JobCancelled  = "cancelled"
)

type job struct {
	id       string
	created  time.Time
	readyAt  time.Time
	profiles []map[string]any
	lists    []string
	fail     bool
	skip     []bool // profiles the job refuses (JobSkipRate)
	status   string
	done     time.Time
	errs     []importError
	ok       int
	applied  []string // ids of the profiles it created or updated, in order
}

type importError struct {
	id      string
	detail  string
	pointer string
	payload map[string]any
}

// createJob: POST /api/profile-bulk-import-jobs (bulk_import_profiles).
func (s *Server) createJob(c *call) {
	if len(c.body) > maxBulkBody {
		s.fail(c, http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large.", "The maximum allowed payload size is 5MB.", nil)
		return
	}
	var doc struct {
		Data *struct {
			Type       string `json:"type"`
			Attributes struct {
				Profiles struct {
					Data []resource `json:"data"`
				} `json:"profiles"`
			} `json:"attributes"`
			Relationships struct {
				Lists struct {
					Data []struct {
						Type string `json:"type"`
						ID   string `json:"id"`
					} `json:"data"`
				} `json:"lists"`
			} `json:"relationships"`
		} `json:"data"`
	}
	if err := decodeNumbers(c.body, &doc); err != nil || doc.Data == nil || doc.Data.Type != "profile-bulk-import-job" {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "A profile-bulk-import-job resource object is required.", map[string]any{"pointer": "/data"})
		return
	}
	n := len(doc.Data.Attributes.Profiles.Data)
	if n == 0 || n > maxBulkProfiles {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "A job takes 1 to 10,000 profiles.", map[string]any{"pointer": "/data/attributes/profiles/data"})
		return
	}
	s.mu.Lock()
	refuse := s.opts.JobRefuseRate > 0 && s.rng.Float64() < s.opts.JobRefuseRate
	if refuse {
		s.stats.JobsRefused++
	}
	s.mu.Unlock()
	if refuse {
		// Refused as a whole, before its lists are looked up: nothing queued.
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "The bulk import job was refused.",
			map[string]any{"pointer": "/data/attributes/profiles/data"})
		return
	}
	j := &job{created: c.now, readyAt: c.now.Add(s.opts.JobDelay), status: JobQueued}
	for _, l := range doc.Data.Relationships.Lists.Data {
		if s.lists != nil && !s.lists[l.ID] {
			s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A list with id "+l.ID+" does not exist.", map[string]any{"pointer": "/data/relationships/lists/data"})
			return
		}
		j.lists = append(j.lists, l.ID)
	}
	for _, p := range doc.Data.Attributes.Profiles.Data {
		b, _ := json.Marshal(p.Attributes)
		if len(b) > maxProfileBytes {
			s.fail(c, http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large.", "The maximum allowed payload size per profile is 100KB.", nil)
			return
		}
		j.profiles = append(j.profiles, p.Attributes)
	}
	s.mu.Lock()
	j.id = s.st.newID("J")
	j.fail = s.opts.JobFailRate > 0 && s.rng.Float64() < s.opts.JobFailRate
	if s.stats.JobsCreated < int64(s.opts.JobFailFirst) {
		j.fail = true
	}
	j.skip = make([]bool, n)
	for i := range j.skip {
		j.skip[i] = s.opts.JobSkipRate > 0 && s.rng.Float64() < s.opts.JobSkipRate
	}
	s.st.jobs[j.id] = j
	s.st.jobOrder = append(s.st.jobOrder, j)
	s.st.scheduled = append(s.st.scheduled, j)
	s.stats.JobsCreated++
	s.advanceLocked(c.now)
	out := j.json(c.base, c.now)
	s.mu.Unlock()
	if !s.afterWrite(c) {
		return
	}
	s.respond(c, http.StatusAccepted, out)
}

// advanceLocked applies every job whose delay is over, in the order they
// were created.
func (s *Server) advanceLocked(now time.Time) {
	unsubs := s.st.unsubs[:0]
	for _, u := range s.st.unsubs {
		if now.Before(u.readyAt) {
			unsubs = append(unsubs, u)
			continue
		}
		s.applyUnsubLocked(u, u.readyAt)
	}
	s.st.unsubs = unsubs
	rest := s.st.scheduled[:0]
	for _, j := range s.st.scheduled {
		if now.Before(j.readyAt) {
			rest = append(rest, j)
			continue
		}
		s.runLocked(j, now)
	}
	s.st.scheduled = rest
}

func (s *Server) runLocked(j *job, now time.Time) {
	j.done = j.readyAt
	profiles := j.profiles
	j.status = JobComplete
	if j.fail {
		j.status = JobCancelled
		s.stats.JobsFailed++
		profiles = profiles[:int(s.opts.JobFailApplies*float64(len(profiles)))]
	}
	for i, a := range profiles {
		ptr := "/data/attributes/profiles/data/" + strconv.Itoa(i) + "/attributes"
		detail, p, ok := s.checkAttrs(a, ptr)
		if ok && j.skip[i] {
			detail, p, ok = "The profile was skipped by the import", ptr, false
		}
		if !ok {
			j.errs = append(j.errs, importError{id: s.st.newID("E"), detail: detail, pointer: p, payload: a})
			s.stats.ImportErrors++
			continue
		}
		j.ok++
		a = withoutNulls(a)
		prof, conflict := s.findLocked(a)
		switch {
		case conflict != nil:
			j.ok--
			j.errs = append(j.errs, importError{id: s.st.newID("E"), detail: "Two identifiers name two different profiles", pointer: ptr, payload: a})
			s.stats.ImportErrors++
		case prof == nil:
			prof = s.createLocked(a, j.readyAt, "bulk import job")
			for _, l := range j.lists {
				prof.lists[l] = true
			}
			j.touch(prof.id)
		default:
			s.writeLocked(prof, a, j.lists, j.readyAt, "bulk import job "+j.id)
			j.touch(prof.id)
		}
	}
}

// touch notes that j created or updated the profile id: once, however
// many of j's profiles it applied to it (two e-mails that differ only in
// case are one profile).
func (j *job) touch(id string) {
	if !slices.Contains(j.applied, id) {
		j.applied = append(j.applied, id)
	}
}

// errorsListed reports whether j's import errors are listed at now
// (Options.ErrorsListedAfter, ErrorsNeverListed): once j ended, at once by
// default.
func (s *Server) errorsListed(j *job, now time.Time) bool {
	if st := j.statusAt(now); st == JobQueued || st == JobProcessing || s.opts.ErrorsNeverListed {
		return false
	}
	return !now.Before(j.done.Add(s.opts.ErrorsListedAfter))
}

// withoutNulls is a job's profile attributes without the fields set to
// null, nested ones (location, properties) too: Klaviyo's Bulk Import
// Profiles guide, "The Bulk Import Profiles API does not support setting
// fields to null to clear them. Only fields explicitly provided with
// non-null values will be updated" (only POST /api/profile-import clears a
// null field).
func withoutNulls(a map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		switch x := v.(type) {
		case nil:
		case map[string]any:
			out[k] = withoutNulls(x)
		default:
			out[k] = v
		}
	}
	return out
}

// status is j's status at now (queued for the first half of its delay,
// processing for the second).
func (j *job) statusAt(now time.Time) string {
	if j.status != JobQueued {
		return j.status
	}
	if !now.Before(j.created.Add(j.readyAt.Sub(j.created) / 2)) {
		return JobProcessing
	}
	return JobQueued
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func (j *job) json(base string, now time.Time) map[string]any {
	st := j.statusAt(now)
	attrs := map[string]any{"status": st, "created_at": ts(j.created), "total_count": len(j.profiles),
		"completed_count": nil, "failed_count": nil, "completed_at": nil, "started_at": nil,
		"expires_at": ts(j.created.Add(30 * 24 * time.Hour))}
	if st != JobQueued {
		attrs["started_at"] = ts(j.created.Add(j.readyAt.Sub(j.created) / 2))
	}
	switch st {
	case JobComplete:
		attrs["completed_count"], attrs["failed_count"], attrs["completed_at"] = j.ok, len(j.errs), ts(j.done)
	case JobCancelled:
		attrs["completed_count"], attrs["failed_count"] = j.ok, len(j.errs)
	}
	lists := []map[string]any{}
	for _, l := range j.lists {
		lists = append(lists, map[string]any{"type": "list", "id": l})
	}
	self := base + "/api/profile-bulk-import-jobs/" + j.id + "/"
	return map[string]any{"data": map[string]any{"type": "profile-bulk-import-job", "id": j.id, "attributes": attrs,
		"relationships": map[string]any{"lists": map[string]any{"data": lists}},
		"links":         map[string]any{"self": self}}, "links": map[string]any{"self": self}}
}

// getJob: GET /api/profile-bulk-import-jobs/{job_id}.
func (s *Server) getJob(c *call, id string) {
	s.mu.Lock()
	j := s.st.jobs[id]
	var out map[string]any
	if j != nil {
		out = j.json(c.base, c.now)
	}
	s.mu.Unlock()
	if j == nil {
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A bulk import job with id "+id+" does not exist.", nil)
		return
	}
	s.respond(c, http.StatusOK, out)
}

// jobErrors: GET /api/profile-bulk-import-jobs/{id}/import-errors, paged.
func (s *Server) jobErrors(c *call, id string) {
	size, offset, ok := s.page(c, defaultPageSize)
	if !ok {
		return
	}
	s.mu.Lock()
	j := s.st.jobs[id]
	data := []map[string]any{}
	more := false
	if j != nil && s.errorsListed(j, c.now) {
		for i := offset; i < len(j.errs) && i < offset+size; i++ {
			e := j.errs[i]
			// How Klaviyo echoes original_payload is not documented: the
			// fake echoes it as it parsed it, a float as a double (12.50
			// as 12.5, as stored says), so a client matching the echo to
			// what it sent by its text misses it.
			var payload any = stored(cloneMap(e.payload), true)
			if s.opts.OmitErrorPayload {
				payload = nil
			}
			data = append(data, map[string]any{"type": "import-error", "id": e.id, "attributes": map[string]any{
				"code": "invalid", "title": "Invalid input.", "detail": e.detail,
				"source": map[string]any{"pointer": e.pointer}, "original_payload": payload}})
		}
		more = offset+size < len(j.errs)
	}
	s.mu.Unlock()
	s.jobPage(c, id, "import-errors", j != nil, data, more, offset+size)
}

// jobProfileIDs: GET /api/profile-bulk-import-jobs/{id}/relationships/profiles
// (get_profile_ids_for_bulk_import_profiles_job), paged: the profiles the
// job created or updated, a cancelled job's too.
func (s *Server) jobProfileIDs(c *call, id string) {
	size, offset, ok := s.page(c, defaultPageSize)
	if !ok {
		return
	}
	s.mu.Lock()
	j := s.st.jobs[id]
	data := []map[string]any{}
	more := false
	if j != nil {
		for i := offset; i < len(j.applied) && i < offset+size; i++ {
			data = append(data, map[string]any{"type": "profile", "id": j.applied[i]})
		}
		more = offset+size < len(j.applied)
	}
	s.mu.Unlock()
	s.jobPage(c, id, "relationships/profiles", j != nil, data, more, offset+size)
}

// jobPage answers one page of a job's sub-resource (sub, relative to the
// job): not found when the job does not exist, else data with a next link
// at cursor next when there is more.
func (s *Server) jobPage(c *call, id, sub string, found bool, data []map[string]any, more bool, next int) {
	if !found {
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A bulk import job with id "+id+" does not exist.", nil)
		return
	}
	links := map[string]any{"self": c.base + c.r.URL.RequestURI()}
	if more {
		nq := c.r.URL.Query()
		nq.Set("page[cursor]", strconv.Itoa(next))
		links["next"] = c.base + "/api/profile-bulk-import-jobs/" + id + "/" + sub + "/?" + nq.Encode()
	}
	s.respond(c, http.StatusOK, map[string]any{"data": data, "links": links})
}

// unsubscribe: POST /api/profile-subscription-bulk-delete-jobs
// (bulk_unsubscribe_profiles), applied before the 202.
func (s *Server) unsubscribe(c *call) {
	var doc struct {
		Data *struct {
			Type       string `json:"type"`
			Attributes struct {
				Profiles struct {
					Data []resource `json:"data"`
				} `json:"profiles"`
			} `json:"attributes"`
			Relationships struct {
				List struct {
					Data *struct {
						ID string `json:"id"`
					} `json:"data"`
				} `json:"list"`
			} `json:"relationships"`
		} `json:"data"`
	}
	if err := json.Unmarshal(c.body, &doc); err != nil || doc.Data == nil || doc.Data.Type != "profile-subscription-bulk-delete-job" {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "A profile-subscription-bulk-delete-job resource object is required.", map[string]any{"pointer": "/data"})
		return
	}
	ps := doc.Data.Attributes.Profiles.Data
	if len(ps) == 0 || len(ps) > maxUnsubProfiles {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "Unsubscribe 1 to 100 profiles per call.", map[string]any{"pointer": "/data/attributes/profiles/data"})
		return
	}
	list := ""
	if d := doc.Data.Relationships.List.Data; d != nil {
		list = d.ID
		if s.lists != nil && !s.lists[list] {
			s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A list with id "+list+" does not exist.", nil)
			return
		}
	}
	for i, p := range ps {
		email, _ := p.Attributes["email"].(string)
		if email == "" || !validEmail(normEmail(email)) {
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "Invalid email address",
				map[string]any{"pointer": fmt.Sprintf("/data/attributes/profiles/data/%d/attributes/email", i)})
			return
		}
	}
	emails := make([]string, len(ps))
	for i, p := range ps {
		emails[i] = normEmail(p.Attributes["email"].(string))
	}
	u := unsubJob{emails: emails, list: list, readyAt: c.now.Add(s.opts.UnsubscribeDelay)}
	s.mu.Lock()
	if s.opts.UnsubscribeDelay > 0 {
		s.st.unsubs = append(s.st.unsubs, u) // after the jobs serveAPI applied for c.now
	} else {
		s.applyUnsubLocked(u, c.now)
	}
	s.mu.Unlock()
	if !s.afterWrite(c) {
		return
	}
	s.respond(c, http.StatusAccepted, nil)
}

// unsubJob is an unsubscribe job queued (Options.UnsubscribeDelay).
type unsubJob struct {
	emails  []string
	list    string
	readyAt time.Time
}

// applyUnsubLocked applies an unsubscribe job: each profile leaves the
// list, or, not in it (or not found: created first), is unsubscribed
// globally, as the spec warns.
func (s *Server) applyUnsubLocked(u unsubJob, now time.Time) {
	for _, email := range u.emails {
		prof := s.st.byEmail[email]
		if prof == nil {
			// As documented: a profile not found is created, then unsubscribed.
			prof = s.createLocked(map[string]any{"email": email}, now, "unsubscribe")
		}
		if u.list != "" && prof.lists[u.list] {
			delete(prof.lists, u.list)
			s.stats.ListRemovals++
		} else {
			// As documented: not in the list, it is unsubscribed globally.
			s.stats.GlobalUnsubs++
		}
		if !prof.unsubbed {
			prof.unsubbed = true
			s.stats.Unsubscribed++
		}
		prof.updated = now
	}
}

// Job returns a job's status, counts and errors' details (tests).
func (s *Server) Job(id string) (status string, total, completed, failed int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.advanceLocked(now)
	j := s.st.jobs[id]
	if j == nil {
		return "", 0, 0, 0, false
	}
	return j.statusAt(now), len(j.profiles), j.ok, len(j.errs), true
}

var statusFilterRE = regexp.MustCompile(`^(equals|any)\(status,\s*\[?((?:\s*(?:"[a-z]+"|'[a-z]+')\s*,?)+)\]?\)$`)

// listJobs: GET /api/profile-bulk-import-jobs (the account's jobs, newest
// first with sort=-created_at), filtered by status with equals or any.
func (s *Server) listJobs(c *call) {
	q := c.r.URL.Query()
	size := defaultPageSize
	if v := q.Get("page[size]"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "page[size] must be between 1 and 100.", map[string]any{"parameter": "page[size]"})
			return
		}
		size = n
	}
	var want map[string]bool
	if f := strings.TrimSpace(q.Get("filter")); f != "" {
		m := statusFilterRE.FindStringSubmatch(f)
		if m == nil {
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "The filter is not supported.", map[string]any{"parameter": "filter"})
			return
		}
		want = map[string]bool{}
		for _, v := range strRE.FindAllString(m[2], -1) {
			want[unquote(v)] = true
		}
	}
	desc := q.Get("sort") == "-created_at"
	s.mu.Lock()
	var data []map[string]any
	n := len(s.st.jobOrder)
	for i := 0; i < n && len(data) < size; i++ {
		j := s.st.jobOrder[i]
		if desc {
			j = s.st.jobOrder[n-1-i]
		}
		if want != nil && !want[j.statusAt(c.now)] {
			continue
		}
		data = append(data, j.json(c.base, c.now)["data"].(map[string]any))
	}
	s.mu.Unlock()
	if data == nil {
		data = []map[string]any{}
	}
	s.respond(c, http.StatusOK, map[string]any{"data": data, "links": map[string]any{"self": c.base + c.r.URL.RequestURI()}})
}
