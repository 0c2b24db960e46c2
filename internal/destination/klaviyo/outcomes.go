package klaviyo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Job statuses: the spec's (queued, processing, complete, cancelled), and
// failed, which Klaviyo's guides name too.
const (
	jobQueued     = "queued"
	jobProcessing = "processing"
	jobComplete   = "complete"
	jobCancelled  = "cancelled"
	jobFailed     = "failed"
)

// maxErrorPages bounds the pages of import errors read for one job
// (10,000 profiles, 100 a page).
const maxErrorPages = 110

// ErrJobNotFound: Klaviyo does not know the bulk import job (expired, or
// another account's). What became of its records is unknown: they are
// settled as in doubt (Verify).
var ErrJobNotFound = fmt.Errorf("klaviyo: the bulk import job is not found (%w)", destination.ErrUnknownRef)

type jobInfo struct {
	Status    string
	Failed    *int
	Completed *int
	Total     *int
	// Ended is when the job completed (completed_at; zero when absent).
	Ended time.Time
}

func (j jobInfo) running() bool { return j.Status == jobQueued || j.Status == jobProcessing }

// getJob reads GET /api/profile-bulk-import-jobs/{job_id}.
func (d *Destination) getJob(ctx context.Context, id string) (jobInfo, error) {
	res, err := d.do(ctx, request{client: d.jobs, method: http.MethodGet, path: "/api/profile-bulk-import-jobs/" + url.PathEscape(id),
		route: "GET /api/profile-bulk-import-jobs/{job_id}"})
	var e *APIError
	if errors.As(err, &e) && err == error(e) && notFound(e) {
		return jobInfo{}, failure.Wrap(failure.DestinationUnavailable, ErrJobNotFound, "klaviyo does not know bulk import job %s", truncate(id, 40))
	}
	if err != nil {
		return jobInfo{}, d.readError(err)
	}
	var doc struct {
		Data struct {
			Attributes struct {
				Status         string `json:"status"`
				FailedCount    *int   `json:"failed_count"`
				CompletedCount *int   `json:"completed_count"`
				TotalCount     *int   `json:"total_count"`
				CompletedAt    string `json:"completed_at"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if json.Unmarshal(res.Body, &doc) != nil || doc.Data.Attributes.Status == "" {
		return jobInfo{}, failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo answered GET /api/profile-bulk-import-jobs/{job_id} with an unexpected body")
	}
	a := doc.Data.Attributes
	j := jobInfo{Status: a.Status, Failed: a.FailedCount, Completed: a.CompletedCount, Total: a.TotalCount}
	if t, err := time.Parse(time.RFC3339, a.CompletedAt); err == nil {
		j.Ended = t
	}
	return j, nil
}

// Outcomes reports what became of recs, accepted by bulk import job ref
// (destination.Async). It asks that job only (GET
// /api/profile-bulk-import-jobs/{ref}), never the account's other jobs.
//
// A record is Delivered only when the job's outcome names it, or when
// nothing the outcome leaves unaccounted could be it. The outcome names
// records two ways: an import error names the record of its original
// payload (refusedRecords); the job's profiles (the ones it created or
// updated) name a profile, which is a record only when no other record of
// the job can be that profile (proven). Two records of one job may be one
// profile (e-mails that differ only in case, a shared external_id or
// phone_number): the profile then proves neither, and the record counts
// written only if Klaviyo holds its values in it (read back; a record that
// landed is never written twice).
//
//   - queued or processing: done is false.
//   - complete: each record an import error names (GET .../{ref}/import-errors,
//     every page) is Rejected with Klaviyo's reason, redacted of e-mail
//     addresses. When every refusal is named (failed_count errors listed,
//     each with its payload) the others are Delivered, with ref as Ref.
//     Otherwise some refusal could be any other record: errors without a
//     payload, or fewer listed than failed_count (listed late, or never).
//     For the latter the job is not done until ErrorsWait after it ended
//     (its errors may still come); then each other record is Delivered
//     only if proven, else Rejected (sent again on a later run).
//   - cancelled or failed: the job stopped. Klaviyo does not document what
//     such a job applied: unless its completed_count is 0, the records it
//     proves written are Delivered (reported not sent, a landed record
//     would be written a second time); every other one is NotSent, to be
//     sent again.
func (d *Destination) Outcomes(ctx context.Context, ref string, recs []destination.Record) ([]destination.Result, bool, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, false, failure.New(failure.Internal, "klaviyo outcomes asked for an empty job reference")
	}
	if strings.HasPrefix(ref, listRefPrefix) {
		return d.listOutcomes(ctx, ref, recs)
	}
	j, err := d.getJob(ctx, ref)
	if err != nil {
		return nil, false, err
	}
	out := make([]destination.Result, len(recs))
	switch j.Status {
	case jobQueued, jobProcessing:
		return nil, false, nil
	case jobCancelled, jobFailed:
		var landed map[string]string
		if j.Completed == nil || *j.Completed > 0 {
			if landed, err = d.proven(ctx, ref, j, recs, recs); err != nil {
				return nil, false, err
			}
		}
		for i, r := range recs {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent, Ref: ref}
			if _, ok := landed[r.Key]; ok {
				out[i].Outcome = destination.Delivered
			}
		}
		return out, true, nil
	case jobComplete:
	default:
		return nil, false, failure.New(failure.DestinationUnavailable,
			fmt.Sprintf("klaviyo answered a bulk import job's status %q, which oncesync does not know", truncate(destination.Redact(j.Status), 40)))
	}
	rejected := map[string][]importError{}
	unnamed, listed := 0, 0
	if j.Failed == nil || *j.Failed > 0 {
		if rejected, unnamed, listed, err = d.importErrors(ctx, ref); err != nil {
			return nil, false, err
		}
	}
	if j.Failed != nil && *j.Failed > listed {
		// Refusals counted and not listed: listed late, or never.
		if !d.errorsWaitOver(ref, j) {
			return nil, false, nil
		}
		unnamed += *j.Failed - listed
	}
	refused := refusedRecords(recs, rejected)
	var rest []destination.Record // records no import error names
	for i, r := range recs {
		if msg, ok := refused[i]; ok {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: msg}
			continue
		}
		out[i] = destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: ref}
		rest = append(rest, r)
	}
	if unnamed > 0 && len(rest) > 0 {
		// Some refusals name no record: a record the job does not prove
		// written is rejected rather than taken for delivered.
		landed, err := d.proven(ctx, ref, j, recs, rest)
		if err != nil {
			return nil, false, err
		}
		for i, r := range recs {
			if out[i].Outcome == destination.Delivered {
				if _, ok := landed[r.Key]; !ok {
					out[i] = destination.Result{Key: r.Key, Outcome: destination.Rejected,
						Message: fmt.Sprintf("klaviyo's bulk import refused profiles without naming them (%d), and does not show this record written", unnamed)}
				}
			}
		}
	}
	return out, true, nil
}

// errorsWaitOver reports whether ErrorsWait has passed since job ref
// ended (its completed_at, or, when Klaviyo does not say, since this
// Destination first saw its errors missing).
func (d *Destination) errorsWaitOver(ref string, j jobInfo) bool {
	now := d.clock.Now()
	since := j.Ended
	if since.IsZero() {
		d.mu.Lock()
		if d.missing == nil || len(d.missing) >= maxAnswered {
			d.missing = map[string]time.Time{}
		}
		var ok bool
		if since, ok = d.missing[ref]; !ok {
			since, d.missing[ref] = now, now
		}
		d.mu.Unlock()
	}
	return !now.Before(since.Add(d.errorsWait))
}

// proven returns the records of cands (among recs, the records asked
// about) that job ref shows written, with their profile id: the job's
// profiles (GET /api/profile-bulk-import-jobs/{id}/relationships/profiles,
// 100 a page) matched to the records by e-mail (GET /api/profiles, 100 a
// request).
//
// A profile the job wrote proves the one record of the job that can be it.
// That is known when recs are the whole job (as many as its total_count)
// and no other record of recs shares an identifier with it (e-mail,
// case-insensitive, external_id or phone_number: Klaviyo merges them into
// one profile); then it goes by the profile, not the values: asked about a
// record with a later value of the row (the runner asking about an earlier
// run's job), the profile still counts, so that the row is sent again
// rather than taken for holding its older delivered value. Otherwise (two
// records of one profile, or only some of the job's records asked about)
// the profile proves nothing by itself: the record is written only if the
// profile, which the job wrote and so put in list_id, holds exactly its
// values (matches, as Verify reads back).
func (d *Destination) proven(ctx context.Context, ref string, j jobInfo, recs, cands []destination.Record) (map[string]string, error) {
	const route = "GET /api/profile-bulk-import-jobs/{id}/relationships/profiles"
	touched := map[string]bool{}
	q := url.Values{}
	q.Set("page[size]", "100")
	err := d.eachPageOf(ctx, request{client: d.jobs, method: http.MethodGet, route: route, query: q,
		path: "/api/profile-bulk-import-jobs/" + url.PathEscape(ref) + "/relationships/profiles"}, maxErrorPages, relatedIDs(route, touched))
	if err != nil {
		return nil, d.readError(err)
	}
	out := map[string]string{}
	if len(touched) == 0 {
		return out, nil
	}
	var emails []string
	seen := map[string]bool{}
	for _, r := range cands {
		p := parseRecord(r)
		if p.invalid == "" && !seen[lower(p.email)] {
			seen[lower(p.email)] = true
			emails = append(emails, p.email)
		}
	}
	held, err := d.findByEmail(ctx, emails)
	if err != nil {
		return nil, err
	}
	alone := aloneInJob(recs)
	whole := j.Total != nil && *j.Total == len(recs)
	for _, r := range cands {
		p := parseRecord(r)
		f, ok := held[lower(p.email)]
		if p.invalid != "" || !ok || !touched[f.id] {
			continue
		}
		if (whole && alone[r.Key]) || matches(p, f) {
			out[r.Key] = f.id
		}
	}
	return out, nil
}

// aloneInJob returns the keys of the records of recs that share no
// identifier Klaviyo finds a profile by (e-mail, case-insensitive,
// external_id, phone_number) with another record of recs.
func aloneInJob(recs []destination.Record) map[string]bool {
	by := map[string][]string{} // identifier -> keys
	for _, r := range recs {
		p := parseRecord(r)
		if p.invalid != "" {
			continue
		}
		ids := map[string]bool{"email:" + lower(p.email): true}
		for _, name := range []string{"external_id", "phone_number"} {
			if v, ok := p.flat[name]; ok && v != nil && fmt.Sprint(v) != "" {
				ids[name+":"+strings.TrimSpace(fmt.Sprint(v))] = true
			}
		}
		for id := range ids {
			by[id] = append(by[id], r.Key)
		}
	}
	out := map[string]bool{}
	for _, r := range recs {
		out[r.Key] = true
	}
	for _, keys := range by {
		if len(keys) > 1 {
			for _, k := range keys {
				out[k] = false
			}
		}
	}
	return out
}

// importError is one profile a job refused: the stored message and the
// profile's attributes as sent (its original payload).
type importError struct {
	msg     string
	payload map[string]any
}

// refusedRecords maps the index of each record of recs an import error
// names to its message. An error names the records of its e-mail. When
// several records of the job share the e-mail (a data conflict in the
// source), it names those whose attributes its original payload holds, so
// that the one Klaviyo applied is not taken for refused and sent again on
// every run. The payload is compared by value (ValuesEqual: Klaviyo may
// echo 12.50 as 12.5); a payload that is none of theirs names them all, as
// refused is the safe reading.
func refusedRecords(recs []destination.Record, errs map[string][]importError) map[int]string {
	out := map[int]string{}
	if len(errs) == 0 {
		return out
	}
	byEmail := map[string][]int{}
	sent := make([]map[string]any, len(recs))
	for i, r := range recs {
		p := parseRecord(r)
		byEmail[lower(p.email)] = append(byEmail[lower(p.email)], i)
		sent[i] = p.attrs
	}
	for email, es := range errs {
		idx := byEmail[email]
		for _, e := range es {
			var named []int
			if len(idx) > 1 && e.payload != nil {
				for _, i := range idx {
					if ValuesEqual(sent[i], e.payload) {
						named = append(named, i)
					}
				}
			}
			if len(named) == 0 {
				named = idx
			}
			for _, i := range named {
				if _, done := out[i]; !done {
					out[i] = e.msg
				}
			}
		}
	}
	return out
}

// importErrors reads every page of a job's import errors: lower-cased
// e-mail → the profiles refused, how many errors name no e-mail (no
// original_payload), and how many are listed in all.
func (d *Destination) importErrors(ctx context.Context, ref string) (out map[string][]importError, unnamed, listed int, err error) {
	out = map[string][]importError{}
	q := url.Values{}
	q.Set("page[size]", "100")
	for page := 0; ; page++ {
		if page == maxErrorPages {
			return nil, 0, 0, failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo kept paging a job's import errors")
		}
		res, err := d.do(ctx, request{client: d.jobs, method: http.MethodGet,
			path: "/api/profile-bulk-import-jobs/" + url.PathEscape(ref) + "/import-errors", query: q,
			route: "GET /api/profile-bulk-import-jobs/{id}/import-errors"})
		if err != nil {
			return nil, 0, 0, d.readError(err)
		}
		var doc struct {
			Data []struct {
				Attributes struct {
					Code            string         `json:"code"`
					Title           string         `json:"title"`
					Detail          string         `json:"detail"`
					OriginalPayload map[string]any `json:"original_payload"`
				} `json:"attributes"`
			} `json:"data"`
			Links struct {
				Next string `json:"next"`
			} `json:"links"`
		}
		if err := json.Unmarshal(res.Body, &doc); err != nil {
			return nil, 0, 0, failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo answered a job's import errors with an unexpected body")
		}
		listed += len(doc.Data)
		for _, e := range doc.Data {
			a := e.Attributes
			email, _ := a.OriginalPayload["email"].(string)
			if email == "" {
				unnamed++
				continue
			}
			why := a.Detail
			if why == "" {
				why = a.Title
			}
			msg := "klaviyo's bulk import refused this profile"
			if a.Code != "" {
				msg += " (" + a.Code + ")"
			}
			if why != "" {
				msg += ": " + why
			}
			out[lower(email)] = append(out[lower(email)], importError{msg: truncate(destination.Redact(msg), 1000), payload: a.OriginalPayload})
		}
		next := cursorOf(doc.Links.Next)
		if next == "" {
			return out, unnamed, listed, nil
		}
		q.Set("page[cursor]", next)
	}
}
