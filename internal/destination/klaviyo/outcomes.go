package klaviyo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

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
			} `json:"attributes"`
		} `json:"data"`
	}
	if json.Unmarshal(res.Body, &doc) != nil || doc.Data.Attributes.Status == "" {
		return jobInfo{}, failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo answered GET /api/profile-bulk-import-jobs/{job_id} with an unexpected body")
	}
	a := doc.Data.Attributes
	return jobInfo{Status: a.Status, Failed: a.FailedCount, Completed: a.CompletedCount}, nil
}

// Outcomes reports what became of recs, accepted by bulk import job ref
// (destination.Async). It asks that job only (GET
// /api/profile-bulk-import-jobs/{ref}), never the account's other jobs.
//
//   - queued or processing: done is false.
//   - complete: the job's import errors (GET .../{ref}/import-errors, every
//     page) name the profiles it refused; each is matched to records by the
//     e-mail of its original payload (case-insensitive; among records
//     sharing an e-mail, by the payload itself: refusedRecords) and that
//     record is Rejected with Klaviyo's reason, redacted of e-mail
//     addresses. The others are Delivered, with ref as Ref.
//   - cancelled or failed: every record is NotSent, to be sent again,
//     unless the job says it completed some profiles (completed_count
//     above 0, or absent): Klaviyo does not document what a job that
//     stopped applied, so the job's profiles are read (appliedBefore) and
//     the records whose profile it created or updated are Delivered.
//     Reported not sent, a landed record would be written a second time
//     (a duplicate write), and the runner, asking about an earlier run's
//     job for a later value of the row, would take that job for having
//     written nothing.
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
		var applied map[string]string
		if j.Completed == nil || *j.Completed > 0 {
			if applied, err = d.appliedBefore(ctx, ref, recs); err != nil {
				return nil, false, err
			}
		}
		for i, r := range recs {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent, Ref: ref}
			if _, ok := applied[r.Key]; ok {
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
	unnamed := 0
	if j.Failed == nil || *j.Failed > 0 {
		if rejected, unnamed, err = d.importErrors(ctx, ref); err != nil {
			return nil, false, err
		}
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
		// Some import errors carry no e-mail to match: the records whose
		// profile the job did not create or update (appliedBefore, by
		// profile, not by value: the runner may ask with a later value of
		// the row) are rejected rather than taken for delivered.
		landed, err := d.appliedBefore(ctx, ref, rest)
		if err != nil {
			return nil, false, err
		}
		for i, r := range recs {
			if out[i].Outcome == destination.Delivered {
				if _, ok := landed[r.Key]; !ok {
					out[i] = destination.Result{Key: r.Key, Outcome: destination.Rejected,
						Message: "klaviyo's bulk import refused a profile without naming it, and this one's profile is not among those it wrote"}
				}
			}
		}
	}
	return out, true, nil
}

// appliedBefore returns the records of recs, with their profile id, whose
// profile the job ref created or updated (a job that stopped before its
// end, or one whose import errors do not all name their profile): the job's
// profiles (GET /api/profile-bulk-import-jobs/{id}/relationships/profiles,
// 100 a page), matched to the records by e-mail (GET /api/profiles, 100 a
// request). It goes by the profile, not the values: asked about a record
// with a later value of the row (the runner asking about an earlier run's
// job), a profile the job touched still counts, so that the row is sent
// again rather than taken for holding its older delivered value.
func (d *Destination) appliedBefore(ctx context.Context, ref string, recs []destination.Record) (map[string]string, error) {
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
	for _, r := range recs {
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
	for _, r := range recs {
		if f, ok := held[lower(parseRecord(r).email)]; ok && touched[f.id] {
			out[r.Key] = f.id
		}
	}
	return out, nil
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
// every run; a payload that is none of theirs (echoed in another form)
// names them all, as refused is the safe reading.
func refusedRecords(recs []destination.Record, errs map[string][]importError) map[int]string {
	out := map[int]string{}
	if len(errs) == 0 {
		return out
	}
	byEmail := map[string][]int{}
	sent := make([]string, len(recs))
	for i, r := range recs {
		p := parseRecord(r)
		byEmail[lower(p.email)] = append(byEmail[lower(p.email)], i)
		sent[i] = canonicalJSON(p.attrs)
	}
	for email, es := range errs {
		idx := byEmail[email]
		for _, e := range es {
			var named []int
			if len(idx) > 1 && e.payload != nil {
				echoed := canonicalJSON(e.payload)
				for _, i := range idx {
					if sent[i] == echoed {
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

// canonicalJSON is v as JSON with numbers in one form (canonical), for
// comparing a payload Klaviyo echoes with what was sent.
func canonicalJSON(v any) string {
	b, _ := json.Marshal(canonical(v))
	return string(b)
}

// importErrors reads every page of a job's import errors: lower-cased
// e-mail → the profiles refused, and how many errors name no e-mail.
func (d *Destination) importErrors(ctx context.Context, ref string) (out map[string][]importError, unnamed int, err error) {
	out = map[string][]importError{}
	q := url.Values{}
	q.Set("page[size]", "100")
	for page := 0; ; page++ {
		if page == maxErrorPages {
			return nil, 0, failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo kept paging a job's import errors")
		}
		res, err := d.do(ctx, request{client: d.jobs, method: http.MethodGet,
			path: "/api/profile-bulk-import-jobs/" + url.PathEscape(ref) + "/import-errors", query: q,
			route: "GET /api/profile-bulk-import-jobs/{id}/import-errors"})
		if err != nil {
			return nil, 0, d.readError(err)
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
			return nil, 0, failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo answered a job's import errors with an unexpected body")
		}
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
			return out, unnamed, nil
		}
		q.Set("page[cursor]", next)
	}
}
