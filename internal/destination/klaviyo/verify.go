package klaviyo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

const (
	// filterBatch is how many e-mails one any(email,[...]) filter names
	// (one page of GET /api/profiles: 100 at most).
	filterBatch = 100
	// jobPollInterval is the pause between two polls of running jobs.
	jobPollInterval = 2 * time.Second
)

// ErrNoVerify: Klaviyo answered a read in a shape oncesync cannot use.
var ErrNoVerify = errors.New("klaviyo: cannot verify")

// found is a profile read back.
type found struct {
	id    string
	attrs map[string]any
}

func lower(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// quote is a string literal of Klaviyo's filter syntax.
func quote(s string) string { return strconv.Quote(s) }

// findByEmail reads the profiles with the given e-mails (GET /api/profiles,
// filter any(email,[...]) or equals(email,...), 100 a request), keyed by
// lower-cased e-mail.
func (d *Destination) findByEmail(ctx context.Context, emails []string) (map[string]found, error) {
	out := map[string]found{}
	for from := 0; from < len(emails); from += filterBatch {
		q := url.Values{}
		q.Set("filter", emailFilter(emails[from:min(from+filterBatch, len(emails))]))
		q.Set("page[size]", strconv.Itoa(filterBatch))
		err := d.eachPage(ctx, request{method: http.MethodGet, path: "/api/profiles", route: "GET /api/profiles", query: q}, func(body []byte) (string, error) {
			var doc struct {
				Data []struct {
					ID         string         `json:"id"`
					Attributes map[string]any `json:"attributes"`
				} `json:"data"`
				Links struct {
					Next string `json:"next"`
				} `json:"links"`
			}
			if err := decodeNumbers(body, &doc); err != nil {
				return "", failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo answered GET /api/profiles with an unexpected body")
			}
			for _, p := range doc.Data {
				if e, _ := p.Attributes["email"].(string); e != "" {
					out[lower(e)] = found{id: p.ID, attrs: p.Attributes}
				}
			}
			return doc.Links.Next, nil
		})
		if err != nil {
			return nil, d.readError(err)
		}
	}
	return out, nil
}

// emailFilter is Klaviyo's filter of the profiles with one of emails (at
// most filterBatch): equals(email,...) or any(email,[...]).
func emailFilter(emails []string) string {
	if len(emails) == 1 {
		return "equals(email," + quote(emails[0]) + ")"
	}
	qs := make([]string, len(emails))
	for i, e := range emails {
		qs[i] = quote(e)
	}
	return "any(email,[" + strings.Join(qs, ",") + "])"
}

// membersAmong returns the ids of the profiles with one of emails that are
// in list_id (GET /api/lists/{id}/relationships/profiles, Klaviyo's "Get
// Profile IDs for List", filtered by e-mail, 100 a request).
func (d *Destination) membersAmong(ctx context.Context, emails []string) (map[string]bool, error) {
	const route = "GET /api/lists/{id}/relationships/profiles"
	out := map[string]bool{}
	for from := 0; from < len(emails); from += filterBatch {
		q := url.Values{}
		q.Set("filter", emailFilter(emails[from:min(from+filterBatch, len(emails))]))
		q.Set("page[size]", strconv.Itoa(filterBatch))
		err := d.eachPage(ctx, request{method: http.MethodGet, path: "/api/lists/" + url.PathEscape(d.listID) + "/relationships/profiles",
			route: route, query: q}, relatedIDs(route, out))
		var e *APIError
		if errors.As(err, &e) && err == error(e) && notFound(e) {
			return nil, d.noList(ctx, e)
		}
		if err != nil {
			return nil, d.readError(err)
		}
	}
	return out, nil
}

// eachPage sends req and the requests of the pages after it, handing each
// answer's body to each, which returns the body's links.next; only that
// link's cursor is used, so every request stays on base_url whatever
// origin the link names. At most 100 pages.
func (d *Destination) eachPage(ctx context.Context, req request, each func(body []byte) (next string, err error)) error {
	return d.eachPageOf(ctx, req, 100, each)
}

// eachPageOf is eachPage with at most maxPages pages.
func (d *Destination) eachPageOf(ctx context.Context, req request, maxPages int, each func(body []byte) (next string, err error)) error {
	for page := 0; ; page++ {
		if page == maxPages {
			return failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo kept paging %s", req.route)
		}
		res, err := d.do(ctx, req)
		if err != nil {
			return err
		}
		link, err := each(res.Body)
		if err != nil {
			return err
		}
		next := cursorOf(link)
		if next == "" {
			return nil
		}
		req.query.Set("page[cursor]", next)
	}
}

func cursorOf(link string) string {
	if link == "" {
		return ""
	}
	u, err := url.Parse(link)
	if err != nil {
		return ""
	}
	return u.Query().Get("page[cursor]")
}

// readError turns a 4xx of a read into a page-level failure.
func (d *Destination) readError(err error) error {
	var e *APIError
	if errors.As(err, &e) && err == error(e) {
		return d.pageFailure(e)
	}
	return err
}

// Verify reports which records already landed in Klaviyo with exactly
// their mapped data, keyed by record key with the profile id as Ref.
//
// In bulk mode an in-doubt page's job (its 202 lost) may still be running:
// before reading the profiles, Verify notes the account's jobs then queued
// or processing (the newest 100) that may be the page's (waitJobs: created
// after since, not answered to this Destination) and polls them, by id,
// every 2 s until they ended or VerifyWait passed. A job started later
// cannot be the page's. One still running then fails Verify
// (ErrJobsRunning, destination_unavailable) and the page stays in doubt:
// sent again now, the records would be written over by that job when it
// runs, with the values of the write in doubt (a stale record when the row
// changed since).
//
// A record landed when a profile has its e-mail (case-insensitive) and
// every mapped attribute has an equal value (ValuesEqual): a mapped null
// or "" equals an absent or null one; numbers equal numeric strings of the
// same value, and a number is compared by value at any depth of a custom
// property's array or object, as Klaviyo answers it in its own form. In bulk mode, a
// profile that holds the values but was last updated before since (the
// write in doubt did not change it) must also be in list_id: a profile that
// already held these values (written by another tool) is not in the list
// until a job of ours adds it, so values alone would settle as delivered a
// job that never reached Klaviyo. Its lists are read (GET
// /api/profiles/{id}/relationships/lists, one request a profile at 60 a
// minute, as Remove reads them) only then. A profile that holds the values
// and was updated after since is in list_id when a job of ours reached
// Klaviyo, but not when a profile import standing in for a refused job
// (writeFallback) or a clearing import (clearFirst) whose answer was lost,
// or another tool, updated it; a record is delivered only in the list. So
// the list's members among those profiles are read (GET
// /api/lists/{id}/relationships/profiles by e-mail, 100 a request) and the
// others added to it (addToList) before they count as landed: only a
// landed import that skipped the list costs a write.
func (d *Destination) Verify(ctx context.Context, recs []destination.Record, since time.Time) (map[string]string, error) {
	valid := false
	for _, r := range recs {
		if parseRecord(r).invalid == "" {
			valid = true
			break
		}
	}
	if !valid {
		return map[string]string{}, nil
	}
	if d.bulk() {
		if err := d.waitJobs(ctx, since); err != nil {
			return nil, err
		}
	}
	var (
		listed  func(found) bool
		updated = map[string]string{} // profiles updated since: id -> e-mail
	)
	if d.bulk() && d.listID != "" {
		listed = func(f found) bool {
			if updatedBefore(f, since) {
				return false
			}
			e, _ := f.attrs["email"].(string)
			updated[f.id] = e
			return true
		}
	}
	landed, err := d.readBack(ctx, recs, listed)
	if err != nil || len(updated) == 0 {
		return landed, err
	}
	emails := make([]string, 0, len(updated))
	for _, e := range updated {
		emails = append(emails, e)
	}
	slices.Sort(emails)
	members, err := d.membersAmong(ctx, emails)
	if err != nil {
		return nil, err
	}
	var join []string
	for id := range updated {
		if !members[id] {
			join = append(join, id)
		}
	}
	slices.Sort(join)
	if _, err := d.addToList(ctx, join); err != nil {
		return nil, err
	}
	return landed, nil
}

// updatedBefore says whether Klaviyo last updated f before t (Klaviyo's
// times are whole seconds); true when it does not say.
func updatedBefore(f found, t time.Time) bool {
	s, _ := f.attrs["updated"].(string)
	u, err := time.Parse(time.RFC3339, s)
	return err != nil || u.Before(t.Truncate(time.Second))
}

// readBack reads recs' profiles by e-mail and returns the keys of those
// that hold exactly their mapped data, with the profile id. With listed, a
// profile for which it is false must also be in list_id (Verify).
func (d *Destination) readBack(ctx context.Context, recs []destination.Record, listed func(found) bool) (map[string]string, error) {
	landed := map[string]string{}
	type cand struct {
		key string
		p   profile
	}
	var cands []cand
	var emails []string
	seen := map[string]bool{}
	for _, r := range recs {
		p := parseRecord(r)
		if p.invalid != "" {
			continue
		}
		cands = append(cands, cand{r.Key, p})
		if e := lower(p.email); !seen[e] {
			seen[e] = true
			emails = append(emails, p.email)
		}
	}
	got, err := d.findByEmail(ctx, emails)
	if err != nil {
		return nil, err
	}
	member := map[string]bool{}
	for _, c := range cands {
		f, ok := got[lower(c.p.email)]
		if !ok || !matches(c.p, f) {
			continue
		}
		if listed != nil && !listed(f) {
			in, asked := member[f.id]
			if !asked {
				if in, err = d.inList(ctx, f.id); err != nil {
					return nil, err
				}
				member[f.id] = in
			}
			if !in {
				continue
			}
		}
		landed[c.key] = f.id
	}
	return landed, nil
}

// jobSkew is how much earlier than since, by Klaviyo's clock, a job of the
// write in doubt may say it was created (the two clocks differ).
const jobSkew = 5 * time.Minute

// ErrJobsRunning: a bulk import job that may hold the write in doubt was
// still queued or processing after VerifyWait.
var ErrJobsRunning = errors.New("klaviyo: a bulk import job that may hold the write in doubt is still running")

// waitJobs waits, within VerifyWait, for the jobs queued or processing now
// that may be the write in doubt's: created after since (less jobSkew),
// and not one whose 202 this Destination read (a job of this run's earlier
// pages, accepted under its id). An older job (another tool's, another
// run's) cannot be, and is not waited for. One still running after
// VerifyWait fails waitJobs rather than let the records be read back and
// sent again: that job would later write its values over the resend (a
// clearing profile import, at once, or a later job Klaviyo may run first),
// a stale record. The page stays in doubt for a later run.
func (d *Destination) waitJobs(ctx context.Context, since time.Time) error {
	q := url.Values{}
	q.Set("filter", `any(status,["queued","processing"])`)
	q.Set("sort", "-created_at")
	q.Set("page[size]", "100")
	res, err := d.do(ctx, request{client: d.jobs, method: http.MethodGet, path: "/api/profile-bulk-import-jobs",
		route: "GET /api/profile-bulk-import-jobs", query: q})
	if err != nil {
		return d.readError(err)
	}
	var doc struct {
		Data []struct {
			ID         string `json:"id"`
			Attributes struct {
				CreatedAt string `json:"created_at"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(res.Body, &doc); err != nil {
		return failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo answered GET /api/profile-bulk-import-jobs with an unexpected body")
	}
	var ids []string // the jobs that may be the write in doubt's
	for _, j := range doc.Data {
		created, err := time.Parse(time.RFC3339, j.Attributes.CreatedAt)
		if !d.wasAnswered(j.ID) && (since.IsZero() || err != nil || !created.Before(since.Add(-jobSkew))) {
			ids = append(ids, j.ID)
		}
	}
	for poll := 0; len(ids) > 0 && poll < int(d.verifyWait/jobPollInterval); poll++ {
		if err := d.sleep(ctx, jobPollInterval); err != nil {
			return d.interrupted(ctx, err)
		}
		still := ids[:0]
		for _, id := range ids {
			j, err := d.getJob(ctx, id)
			switch {
			case errors.Is(err, ErrJobNotFound):
			case err != nil:
				return err
			case j.running():
				still = append(still, id)
			}
		}
		ids = still
	}
	if len(ids) > 0 {
		return failure.Wrap(failure.DestinationUnavailable, ErrJobsRunning,
			"klaviyo bulk import job %s, which may hold a write in doubt, was still running after %s; a later run settles the page once it ended",
			truncate(ids[0], 40), d.verifyWait)
	}
	return nil
}

// matches reports whether f holds exactly p's mapped data (see Verify).
func matches(p profile, f found) bool {
	if e, _ := f.attrs["email"].(string); lower(e) != lower(p.email) {
		return false
	}
	for name, want := range p.flat {
		if !ValuesEqual(want, f.value(name)) {
			return false
		}
	}
	return true
}

// value is f's value of the mapped attribute name: a profile attribute,
// location.FIELD or properties.NAME (nil when f has none).
func (f found) value(name string) any {
	for _, nested := range []string{"properties", "location"} {
		if field, ok := strings.CutPrefix(name, nested+"."); ok {
			m, _ := f.attrs[nested].(map[string]any)
			return m[field]
		}
	}
	return f.attrs[name]
}

// ValuesEqual reports whether a mapped value and the value Klaviyo returned
// are the same (see Verify). A mapped null or "" equals an absent, null or
// "" one; a number equals a number or numeric string of the same value
// (numEqual), and a string or a boolean the same string or boolean (a
// profile attribute is text at Klaviyo: true is "true"). An array or an
// object (a custom property's JSON) equals one with the same members in
// the same order, compared by sameJSON.
func ValuesEqual(want, got any) bool {
	w, g := canonical(want), canonical(got)
	if empty(w) || empty(g) {
		return empty(w) && empty(g)
	}
	switch wv := w.(type) {
	case string:
		switch gv := g.(type) {
		case string:
			return wv == gv
		case json.Number:
			return numEqual(wv, gv.String())
		case bool:
			b, err := strconv.ParseBool(wv)
			return err == nil && b == gv
		}
	case json.Number:
		switch gv := g.(type) {
		case string:
			return numEqual(wv.String(), gv)
		case json.Number:
			return numEqual(wv.String(), gv.String())
		}
	case bool:
		switch gv := g.(type) {
		case bool:
			return wv == gv
		case string:
			b, err := strconv.ParseBool(gv)
			return err == nil && b == wv
		}
	}
	return sameJSON(w, g)
}

// sameJSON reports whether two values of a custom property's JSON (after a
// JSON round trip, numbers as json.Number) are the same at every depth:
// numbers by value (numEqual: Klaviyo keeps a float as a double and
// answers it in that form, 12.50 as 12.5, 1e2 as 100), an object's null
// member as an absent one (Klaviyo's bulk import jobs do not set a field
// to null), anything else exactly.
func sameJSON(want, got any) bool {
	switch w := want.(type) {
	case json.Number:
		g, ok := got.(json.Number)
		return ok && numEqual(w.String(), g.String())
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameJSON(w[i], g[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !sameJSON(v, g[k]) {
				return false
			}
		}
		for k, v := range g {
			if _, has := w[k]; !has && v != nil {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, got)
}

func empty(v any) bool { return v == nil || v == "" }

// numEqual reports whether got, a number Klaviyo answered, is the number
// want was sent as: the same value, or, for a want written with a fraction
// or an exponent (a float: Klaviyo keeps it as a double), the same double
// (0.12345678901234567890 is read back 0.12345678901234568). An integer
// must be equal to the digit: Klaviyo keeps integers whole, so an integer
// past 2^53 that differs from want only in its last digits is another
// value, not want rounded.
func numEqual(want, got string) bool {
	want, got = strings.TrimSpace(want), strings.TrimSpace(got)
	x, ok1 := new(big.Rat).SetString(want)
	y, ok2 := new(big.Rat).SetString(got)
	if !ok1 || !ok2 {
		return false
	}
	if x.Cmp(y) == 0 {
		return true
	}
	if !strings.ContainsAny(want, ".eE") {
		return false
	}
	a, err1 := strconv.ParseFloat(want, 64)
	b, err2 := strconv.ParseFloat(got, 64)
	return err1 == nil && err2 == nil && a == b
}

func canonical(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if decodeNumbers(b, &out) != nil {
		return v
	}
	return out
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// relatedIDs is the page callback of a relationships endpoint (a list's or
// a job's profiles): it adds each page's ids to into and returns the next
// page's link.
func relatedIDs(route string, into map[string]bool) func(body []byte) (string, error) {
	return func(body []byte) (string, error) {
		var doc struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			Links struct {
				Next string `json:"next"`
			} `json:"links"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return "", failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo answered %s with an unexpected body", route)
		}
		for _, p := range doc.Data {
			into[p.ID] = true
		}
		return doc.Links.Next, nil
	}
}
