package klaviyo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Write delivers recs by the path of the write mode and mode (see the
// package comment). A record whose data cannot be a Klaviyo profile is
// Rejected without a request. On a page-level failure the results of
// records already settled are returned with the error, NotSent for those
// whose request provably never reached Klaviyo.
func (d *Destination) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		out := make([]destination.Result, len(recs))
		for i, r := range recs {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
		}
		return out, failure.Wrap(failure.DestinationUnavailable, fmt.Errorf("%w: %w", destination.ErrNotSent, err), "klaviyo request interrupted")
	}
	var (
		out  []destination.Result
		todo []destination.Record
		ps   = map[string]profile{}
	)
	for _, r := range recs {
		p := parseRecord(r)
		if p.invalid != "" {
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: p.invalid})
			continue
		}
		ps[r.Key] = p
		todo = append(todo, r)
	}
	if len(todo) == 0 {
		return out, nil
	}
	var (
		res []destination.Result
		err error
	)
	switch {
	case d.bulk():
		res, err = d.writeBulk(ctx, todo, ps)
	default:
		send := d.importOne
		switch d.writeMode {
		case destination.Update:
			send = d.updateOne
		case destination.Create:
			send = d.createOne
		}
		res, err = d.writeEach(ctx, todo, ps, func(ctx context.Context, r destination.Record) (destination.Result, error) {
			return send(ctx, r, ps[r.Key])
		})
	}
	return append(out, res...), err
}

// writeEach is apiclient.WriteEach with this package's failure for an
// interrupted fan-out. Records of one profile (ps, the records parsed, by
// key: the e-mail, lower-cased as Klaviyo keeps it) go one after the
// other, in page order, so that it keeps the one read last.
func (d *Destination) writeEach(ctx context.Context, recs []destination.Record, ps map[string]profile,
	send func(context.Context, destination.Record) (destination.Result, error)) ([]destination.Result, error) {
	key := func(r destination.Record) string { return lower(ps[r.Key].email) }
	res, err := apiclient.WriteEach(ctx, recs, d.conc, key, send)
	if err != nil && failure.CodeOf(err) == failure.Internal {
		err = d.interrupted(ctx, err)
	}
	return res, err
}

// recordLevel reports whether a 4xx is about the record's content.
func recordLevel(e *APIError) bool {
	if revisionRefused(e) {
		return false
	}
	switch e.Status {
	case http.StatusRequestEntityTooLarge:
		return true // the body's size, whoever says it
	case http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity:
		return e.Klaviyos
	}
	return false
}

// judge turns a request's error into a record's result (a record-level
// refusal) or a page-level error.
func (d *Destination) judge(r destination.Record, err error) (destination.Result, error) {
	var e *APIError
	if errors.As(err, &e) && err == error(e) {
		if recordLevel(e) {
			return destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: e.message()}, nil
		}
		return destination.Result{}, d.pageFailure(e)
	}
	return destination.Result{}, err
}

type profileDoc struct {
	Data struct {
		Type       string         `json:"type"`
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
	} `json:"data"`
}

// errNotKlaviyo is a success status whose answer is not one Klaviyo gives.
var errNotKlaviyo = errors.New("a success answer that is not Klaviyo's")

// writtenProfile reads a successful answer to a one-profile write as
// ../shared/klaviyo/profiles.json defines it: one of the statuses the
// operation answers and the profile resource with its id. Any other answer
// (a web server or a proxy's page at base_url) says nothing of the profile:
// the record is in doubt, for the read-back to decide, never counted written.
func writtenProfile(res *apiclient.Response, route string, statuses ...int) (string, error) {
	var doc profileDoc
	if slices.Contains(statuses, res.Status) && json.Unmarshal(res.Body, &doc) == nil && doc.Data.Type == "profile" && doc.Data.ID != "" {
		return doc.Data.ID, nil
	}
	return "", failure.Wrap(failure.DestinationUnavailable, errNotKlaviyo,
		"klaviyo answered %s with HTTP %d and no profile; check the destination's base_url", route, res.Status)
}

// importOne: POST /api/profile-import (create or update by e-mail).
func (d *Destination) importOne(ctx context.Context, r destination.Record, p profile) (destination.Result, error) {
	res, err := d.do(ctx, request{method: http.MethodPost, path: "/api/profile-import", route: "POST /api/profile-import",
		body: marshal(map[string]any{"data": p.resource()})})
	if err != nil {
		return d.judge(r, err)
	}
	id, err := writtenProfile(res, "POST /api/profile-import", http.StatusOK, http.StatusCreated)
	if err != nil {
		return destination.Result{}, err
	}
	return destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: id}, nil
}

// createOne: POST /api/profiles; a 409 duplicate is a skip (write_mode
// create) when a profile holds this e-mail. Klaviyo answers 409 when any
// identifier is another profile's ("A profile already exists with one of
// these identifiers": a phone number, an external_id), and then no profile
// of this e-mail exists: the record is rejected, never counted delivered.
func (d *Destination) createOne(ctx context.Context, r destination.Record, p profile) (destination.Result, error) {
	res, err := d.do(ctx, request{method: http.MethodPost, path: "/api/profiles", route: "POST /api/profiles",
		body: marshal(map[string]any{"data": p.resource()})})
	var e *APIError
	if errors.As(err, &e) && e.Status == http.StatusConflict && e.Klaviyos {
		held, ferr := d.findByEmail(ctx, []string{p.email})
		if ferr != nil {
			return destination.Result{}, ferr
		}
		if f, ok := held[lower(p.email)]; ok {
			return destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: f.id, Skipped: destination.SkipExists}, nil
		}
		return destination.Result{Key: r.Key, Outcome: destination.Rejected,
			Message: "another Klaviyo profile holds one of this record's identifiers (phone_number or external_id): " + e.message()}, nil
	}
	if err != nil {
		return d.judge(r, err)
	}
	id, err := writtenProfile(res, "POST /api/profiles", http.StatusCreated)
	if err != nil {
		return destination.Result{}, err
	}
	return destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: id}, nil
}

// updateOne looks the profile up by e-mail and patches it; none is a skip
// (write_mode update).
func (d *Destination) updateOne(ctx context.Context, r destination.Record, p profile) (destination.Result, error) {
	found, err := d.findByEmail(ctx, []string{p.email})
	if err != nil {
		return destination.Result{}, err
	}
	got, ok := found[lower(p.email)]
	if !ok {
		return destination.Result{Key: r.Key, Outcome: destination.Delivered, Skipped: destination.SkipNotFound}, nil
	}
	attrs := make(map[string]any, len(p.attrs))
	for k, v := range p.attrs {
		if k != "email" {
			attrs[k] = v
		}
	}
	body := marshal(map[string]any{"data": map[string]any{"type": "profile", "id": got.id, "attributes": attrs}})
	res, err := d.do(ctx, request{method: http.MethodPatch, path: "/api/profiles/" + url.PathEscape(got.id),
		route: "PATCH /api/profiles/{id}", body: body})
	var e *APIError
	if errors.As(err, &e) && notFound(e) {
		// Deleted since it was looked up.
		return destination.Result{Key: r.Key, Outcome: destination.Delivered, Skipped: destination.SkipNotFound}, nil
	}
	if err != nil {
		return d.judge(r, err)
	}
	if _, err := writtenProfile(res, "PATCH /api/profiles/{id}", http.StatusOK); err != nil {
		return destination.Result{}, err
	}
	return destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: got.id}, nil
}

// writeBulk sends recs as bulk import jobs (at most MaxJobProfiles and
// MaxJobBody each). Each is Accepted with its job id as Ref. A job Klaviyo
// refuses whole for its content (400, 413, 422) is resent one profile
// import per record, so that only the bad record is rejected with
// Klaviyo's message (writeFallback).
func (d *Destination) writeBulk(ctx context.Context, recs []destination.Record, ps map[string]profile) ([]destination.Result, error) {
	recs, out, err := d.clearFirst(ctx, recs, ps)
	if err != nil || len(recs) == 0 {
		return out, err
	}
	head := []byte(`{"data":{"type":"profile-bulk-import-job","attributes":{"profiles":{"data":[`)
	tail := []byte(`]}},"relationships":{"lists":{"data":[{"type":"list","id":` + strconv.Quote(d.listID) + `}]}}}}`)
	items := make([][]byte, len(recs))
	for i, r := range recs {
		items[i] = marshal(ps[r.Key].resource())
	}
	for from := 0; from < len(recs); {
		to, size := from, len(head)+len(tail)
		for to < len(recs) && to-from < MaxJobProfiles && (to == from || size+len(items[to])+1 <= MaxJobBody) {
			size += len(items[to]) + 1
			to++
		}
		var body bytes.Buffer
		body.Grow(size)
		body.Write(head)
		for i := from; i < to; i++ {
			if i > from {
				body.WriteByte(',')
			}
			body.Write(items[i])
		}
		body.Write(tail)
		chunk := recs[from:to]
		res, err := d.do(ctx, request{client: d.jobs, method: http.MethodPost, path: "/api/profile-bulk-import-jobs",
			route: "POST /api/profile-bulk-import-jobs", body: body.Bytes()})
		var e *APIError
		switch {
		case errors.As(err, &e) && err == error(e) && notFound(e):
			return append(out, notSent(recs[from:])...), d.noList(ctx, e)
		case errors.As(err, &e) && err == error(e) && recordLevel(e):
			res, err := d.writeFallback(ctx, chunk, ps)
			out = append(out, res...)
			if err != nil {
				return append(out, notSent(recs[to:])...), err
			}
		case errors.As(err, &e) && err == error(e):
			return append(out, notSent(recs[from:])...), d.pageFailure(e)
		case err != nil:
			if errors.Is(err, destination.ErrNotSent) {
				return append(out, notSent(recs[from:])...), err
			}
			// The chunk may have reached Klaviyo: in doubt (Verify).
			return append(out, notSent(recs[to:])...), err
		default:
			var doc struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if json.Unmarshal(res.Body, &doc) != nil || doc.Data.ID == "" {
				return append(out, notSent(recs[to:])...), failure.Wrap(failure.DestinationUnavailable, ErrOutcomeUnknown,
					"klaviyo accepted a bulk import job without its id")
			}
			d.noteAnswered(doc.Data.ID)
			for _, r := range chunk {
				out = append(out, destination.Result{Key: r.Key, Outcome: destination.Accepted, Ref: doc.Data.ID})
			}
		}
		from = to
	}
	return out, nil
}

// writeFallback sends recs, whose job Klaviyo refused whole, one profile
// import each, then adds the profiles imported to list_id, which a job
// would have done and a profile import does not (POST
// /api/lists/{id}/relationships/profiles, by profile id). A record whose
// profile is in the list is Delivered; one refused is Rejected. One whose
// profile was written but not yet added (the addition failed, or the page
// failed before it) is Accepted under a list reference (listRef): the
// write landed and must not be sent again, and Outcomes settles it by
// adding it to the list, in this run's poller or the next run's
// (docs/guide.md#klaviyo-bulk-import-jobs-accepted-then-delivered-or-rejected).
// An import whose outcome is unknown has no result and is read back, as on
// the single path.
func (d *Destination) writeFallback(ctx context.Context, recs []destination.Record, ps map[string]profile) ([]destination.Result, error) {
	res, err := d.writeEach(ctx, recs, ps, func(ctx context.Context, r destination.Record) (destination.Result, error) {
		return d.importOne(ctx, r, ps[r.Key])
	})
	var ids []string // once each: records may share an e-mail
	seen := map[string]bool{}
	for _, x := range res {
		if x.Outcome == destination.Delivered && !seen[x.Ref] {
			seen[x.Ref] = true
			ids = append(ids, x.Ref)
		}
	}
	var listed map[string]bool
	if err == nil {
		var lerr error
		listed, lerr = d.addToList(ctx, ids)
		if failure.CodeOf(lerr) == failure.InvalidSyncDefinition {
			err = lerr // no such list: the page fails with the fix to make
		}
		// Any other failure leaves the records accepted, added by Outcomes.
	}
	out := make([]destination.Result, 0, len(res))
	for _, x := range res {
		if x.Outcome == destination.Delivered && !listed[x.Ref] {
			x = destination.Result{Key: x.Key, Outcome: destination.Accepted, Ref: listRefPrefix + x.Ref}
		}
		out = append(out, x)
	}
	return out, err
}

// listRefPrefix marks an Accepted record's reference as a profile written
// by a profile import and still to be added to list_id (the rest is the
// profile's id), where a bulk job's reference is the job's id.
const listRefPrefix = "list-add:"

// listOutcomes settles records accepted under a list reference: once their
// profile is added to list_id they are Delivered.
func (d *Destination) listOutcomes(ctx context.Context, ref string, recs []destination.Record) ([]destination.Result, bool, error) {
	id := strings.TrimPrefix(ref, listRefPrefix)
	if id == "" {
		return nil, false, failure.New(failure.Internal, "klaviyo outcomes asked for a list reference without a profile id")
	}
	if _, err := d.addToList(ctx, []string{id}); err != nil {
		return nil, false, err
	}
	out := make([]destination.Result, len(recs))
	for i, r := range recs {
		out[i] = destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: id}
	}
	return out, true, nil
}

// addToList adds the profiles ids to list_id, maxListAdd a call, and
// returns those it added before an error. Adding a profile already in the
// list changes nothing, so a lost answer is retried in-run.
func (d *Destination) addToList(ctx context.Context, ids []string) (map[string]bool, error) {
	added, _, err := d.listMembers(ctx, http.MethodPost, ids)
	return added, err
}

// listMembers adds (POST) or removes (DELETE) the profiles ids to or from
// list_id with /api/lists/{id}/relationships/profiles, maxListAdd a call.
// It returns those done, and those sent (done or not: a call whose answer
// is unknown), before an error. Either call done twice is done once, so a
// lost answer is retried in-run.
func (d *Destination) listMembers(ctx context.Context, method string, ids []string) (done, sent map[string]bool, _ error) {
	route := method + " /api/lists/{id}/relationships/profiles"
	done, sent = make(map[string]bool, len(ids)), make(map[string]bool, len(ids))
	for from := 0; from < len(ids); from += maxListAdd {
		chunk := ids[from:min(from+maxListAdd, len(ids))]
		data := make([]map[string]string, len(chunk))
		for i, id := range chunk {
			data[i] = map[string]string{"type": "profile", "id": id}
		}
		res, err := d.do(ctx, request{client: d.listAdds, method: method, route: route,
			path: "/api/lists/" + url.PathEscape(d.listID) + "/relationships/profiles",
			body: marshal(map[string]any{"data": data}), idempotent: true})
		var e *APIError
		switch {
		case errors.As(err, &e) && err == error(e) && notFound(e):
			return done, sent, d.noList(ctx, e)
		case errors.As(err, &e) && err == error(e):
			return done, sent, d.pageFailure(e)
		case err != nil:
			if !errors.Is(err, destination.ErrNotSent) {
				for _, id := range chunk {
					sent[id] = true
				}
			}
			return done, sent, err
		case res.Status != http.StatusNoContent:
			// Klaviyo answers 204; anything else is not its answer.
			for _, id := range chunk {
				sent[id] = true
			}
			return done, sent, failure.Wrap(failure.DestinationUnavailable, errNotKlaviyo,
				"klaviyo answered %s with HTTP %d, not 204; check the destination's base_url", route, res.Status)
		}
		for _, id := range chunk {
			done[id], sent[id] = true, true
		}
	}
	return done, sent, nil
}

// noList is the failure of a call naming a list_id that was answered 404
// (e): Klaviyo has no such list, unless the server has no profiles either
// (one GET /api/profiles asks), which is a base_url that does not reach
// Klaviyo's API, not a list to fix.
func (d *Destination) noList(ctx context.Context, e *APIError) error {
	if pe := (*APIError)(nil); errors.As(d.readAProfile(ctx), &pe) && pe.Status == http.StatusNotFound {
		return failure.Wrap(failure.DestinationUnavailable, d.safe(e),
			"klaviyo answered HTTP 404 to %s and to GET /api/profiles: check the destination's base_url", e.Route)
	}
	return failure.Wrap(failure.InvalidSyncDefinition, d.safe(e),
		"klaviyo has no list %q: fix destination.list_id (Klaviyo: Lists & segments shows each list's id)", d.listID)
}

// clearFirst clears, before recs go out in jobs, each field a record
// empties (null or "") that Klaviyo still holds: a bulk job does not clear
// a field sent as null ("The Bulk Import Profiles API does not support
// setting fields to null to clear them", Klaviyo's bulk import guide), a
// profile import does (profiles.json: "Setting a field to null will clear
// out the field"). The profiles are read first, 100 a request, so that a
// field already empty is not written again; each clearing import carries
// the e-mail and the fields to clear, nothing else. It returns the records
// still to send, the results of those it settled (a clear Klaviyo refused:
// rejected, not sent in a job) and an error that ends the Write (the
// records not cleared yet are then not sent).
func (d *Destination) clearFirst(ctx context.Context, recs []destination.Record, ps map[string]profile) ([]destination.Record, []destination.Result, error) {
	var emails []string
	for _, r := range recs {
		if p := ps[r.Key]; p.empties() {
			emails = append(emails, p.email)
		}
	}
	if len(emails) == 0 {
		return recs, nil, nil
	}
	held, err := d.findByEmail(ctx, emails)
	if err != nil {
		return nil, notSent(recs), err
	}
	clears := map[string]profile{}
	var clearing []destination.Record
	for _, r := range recs {
		p := ps[r.Key]
		if f, ok := held[lower(p.email)]; ok {
			if c, ok := p.clearing(f); ok {
				clears[r.Key] = c
				clearing = append(clearing, r)
			}
		}
	}
	if len(clearing) == 0 {
		return recs, nil, nil
	}
	res, err := d.writeEach(ctx, clearing, ps, func(ctx context.Context, r destination.Record) (destination.Result, error) {
		return d.importOne(ctx, r, clears[r.Key])
	})
	var (
		out     []destination.Result
		cleared = map[string]bool{}
	)
	for _, x := range res {
		if x.Outcome == destination.Delivered {
			cleared[x.Key] = true
		} else {
			out = append(out, x) // rejected, or not sent
		}
	}
	if err != nil {
		// The jobs are not sent: records cleared or not touched are not
		// sent; a clear left in doubt has no result (Verify settles it).
		for _, r := range recs {
			if _, isClearing := clears[r.Key]; cleared[r.Key] || !isClearing {
				out = append(out, destination.Result{Key: r.Key, Outcome: destination.NotSent})
			}
		}
		return nil, out, err
	}
	todo := recs[:0:0]
	for _, r := range recs {
		if _, isClearing := clears[r.Key]; !isClearing || cleared[r.Key] {
			todo = append(todo, r)
		}
	}
	return todo, out, nil
}

func notSent(recs []destination.Record) []destination.Result {
	out := make([]destination.Result, len(recs))
	for i, r := range recs {
		out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
	}
	return out
}
