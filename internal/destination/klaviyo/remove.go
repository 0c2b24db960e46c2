package klaviyo

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// maxUnsubscribe is Klaviyo's limit of profiles per unsubscribe call.
const maxUnsubscribe = 100

// unsubscribeGrace is how long a removal sent by an earlier run, whose answer
// was not recorded, waits before it is sent again (RemovalGrace): Klaviyo
// queues an unsubscribe job, and a second job that runs after the first took
// the profile out of the list unsubscribes it globally.
const unsubscribeGrace = 10 * time.Minute

// RemovalGrace makes the runner wait unsubscribeGrace before it sends again
// a removal an earlier run may have queued (destination.QueuedRemover).
func (d *Destination) RemovalGrace() time.Duration { return unsubscribeGrace }

// Handle is the record's e-mail address, lower-cased: what Remove finds
// the profile by.
func (d *Destination) Handle(rec destination.Record) (string, error) {
	p := parseRecord(rec)
	if p.email == "" || !plausibleEmail(p.email) {
		return "", failure.New(failure.InvalidSyncDefinition, "klaviyo: a record without a valid e-mail has no handle")
	}
	return lower(p.email), nil
}

// Remove unsubscribes the profiles rms name from list_id (write_mode
// mirror), with POST /api/profile-subscription-bulk-delete-jobs naming the
// list. Klaviyo's spec warns that this endpoint unsubscribes globally a
// profile that is not in the list, and creates one it does not find: so
// each profile is looked up first (GET /api/profiles by e-mail, then GET
// /api/profiles/{id}/relationships/lists) and only those in the list are
// sent. A profile that does not exist or is not in the list is already
// removed: Delivered, nothing sent. A removal is thus idempotent: sent
// again after its answer was lost, it finds the profile out of the list.
// A person who takes a profile out of the list between the look-up and
// the call would see it unsubscribed globally; the window is one request.
func (d *Destination) Remove(ctx context.Context, rms []destination.Removal) ([]destination.Result, error) {
	if len(rms) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		out := make([]destination.Result, len(rms))
		for i, r := range rms {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
		}
		return out, failure.Wrap(failure.DestinationUnavailable, errors.Join(destination.ErrNotSent, err), "klaviyo request interrupted")
	}
	var out []destination.Result
	emails := make([]string, 0, len(rms))
	for _, r := range rms {
		if plausibleEmail(strings.TrimSpace(r.Handle)) {
			emails = append(emails, strings.TrimSpace(r.Handle))
		}
	}
	foundBy, err := d.findByEmail(ctx, emails)
	if err != nil {
		return notSentRemovals(rms), err
	}
	var inList []destination.Removal
	for i, r := range rms {
		f, ok := foundBy[lower(r.Handle)]
		if !plausibleEmail(strings.TrimSpace(r.Handle)) {
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: "the removal's handle is not an e-mail address"})
			continue
		}
		if !ok {
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Delivered})
			continue
		}
		member, err := d.inList(ctx, f.id)
		if err != nil {
			// Only reads were sent so far: nothing of these was removed.
			out = append(out, notSentRemovals(inList)...)
			return append(out, notSentRemovals(rms[i:])...), err
		}
		if !member {
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: f.id})
			continue
		}
		inList = append(inList, r)
	}
	for from := 0; from < len(inList); from += maxUnsubscribe {
		chunk := inList[from:min(from+maxUnsubscribe, len(inList))]
		profiles := make([]map[string]any, len(chunk))
		for i, r := range chunk {
			profiles[i] = map[string]any{"type": "profile", "attributes": map[string]any{
				"email":         strings.TrimSpace(r.Handle),
				"subscriptions": map[string]any{"email": map[string]any{"marketing": map[string]any{"consent": "UNSUBSCRIBED"}}},
			}}
		}
		body := marshal(map[string]any{"data": map[string]any{
			"type":          "profile-subscription-bulk-delete-job",
			"attributes":    map[string]any{"profiles": map[string]any{"data": profiles}},
			"relationships": map[string]any{"list": map[string]any{"data": map[string]any{"type": "list", "id": d.listID}}},
		}})
		_, err := d.do(ctx, request{method: http.MethodPost, path: "/api/profile-subscription-bulk-delete-jobs",
			route: "POST /api/profile-subscription-bulk-delete-jobs", body: body})
		var e *APIError
		switch {
		case errors.As(err, &e) && err == error(e) && recordLevel(e):
			for _, r := range chunk {
				out = append(out, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: e.message()})
			}
			continue
		case errors.As(err, &e) && err == error(e) && notFound(e):
			return append(out, notSentRemovals(inList[from:])...), d.noList(ctx, e)
		case errors.As(err, &e) && err == error(e):
			return append(out, notSentRemovals(inList[from:])...), d.pageFailure(e)
		case err != nil:
			rest := inList[from+len(chunk):]
			if errors.Is(err, destination.ErrNotSent) {
				rest = inList[from:]
			}
			return append(out, notSentRemovals(rest)...), err
		}
		for _, r := range chunk {
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Delivered})
		}
	}
	return out, nil
}

// inList reports whether profile id is in list_id.
func (d *Destination) inList(ctx context.Context, id string) (bool, error) {
	res, err := d.do(ctx, request{client: d.lists, method: http.MethodGet,
		path: "/api/profiles/" + url.PathEscape(id) + "/relationships/lists", route: "GET /api/profiles/{id}/relationships/lists"})
	var e *APIError
	if errors.As(err, &e) && err == error(e) && notFound(e) {
		return false, nil
	}
	if err != nil {
		return false, d.readError(err)
	}
	var doc struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := decodeNumbers(res.Body, &doc); err != nil {
		return false, failure.Wrap(failure.DestinationUnavailable, ErrNoVerify, "klaviyo answered a profile's lists with an unexpected body")
	}
	for _, l := range doc.Data {
		if l.ID == d.listID {
			return true, nil
		}
	}
	return false, nil
}

func notSentRemovals(rms []destination.Removal) []destination.Result {
	out := make([]destination.Result, len(rms))
	for i, r := range rms {
		out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
	}
	return out
}
