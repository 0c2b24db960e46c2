package klaviyo

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Handle is the record's e-mail address, lower-cased: what Remove finds
// the profile by.
func (d *Destination) Handle(rec destination.Record) (string, error) {
	p := parseRecord(rec)
	if p.email == "" || !plausibleEmail(p.email) {
		return "", failure.New(failure.InvalidSyncDefinition, "klaviyo: a record without a valid e-mail has no handle")
	}
	return lower(p.email), nil
}

// Remove takes the profiles rms name out of list_id (write_mode mirror)
// with DELETE /api/lists/{id}/relationships/profiles, by profile id, 1000
// a call: Klaviyo's "Remove Profiles from List", answered 204 at once,
// which leaves the profiles' consent as it was. Each profile is found by
// e-mail first (GET /api/profiles). A profile that does not exist is
// already removed: Delivered, nothing sent; removing one that is not in
// the list changes nothing, so a removal sent again after its answer was
// lost is harmless. It used the bulk unsubscribe job, which unsubscribed
// the profiles from e-mail marketing (a row back in the source stayed
// unsubscribed, and so did its profile on every other list), was applied
// later (a row back in the meantime was taken out again by it), and could
// fail unseen (an independent check, 2026-12-06).
func (d *Destination) Remove(ctx context.Context, rms []destination.Removal) ([]destination.Result, error) {
	if len(rms) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return notSentRemovals(rms), failure.Wrap(failure.DestinationUnavailable, errors.Join(destination.ErrNotSent, err), "klaviyo request interrupted")
	}
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
	out := make([]destination.Result, 0, len(rms))
	var ids []string // once each: removals may share a profile
	byID := map[string][]destination.Removal{}
	for _, r := range rms {
		f, ok := foundBy[lower(r.Handle)]
		switch {
		case !plausibleEmail(strings.TrimSpace(r.Handle)):
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: "the removal's handle is not an e-mail address"})
		case !ok:
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Delivered})
		default:
			if _, seen := byID[f.id]; !seen {
				ids = append(ids, f.id)
			}
			byID[f.id] = append(byID[f.id], r)
		}
	}
	removed, sent, err := d.listMembers(ctx, http.MethodDelete, ids)
	for _, id := range ids {
		for _, r := range byID[id] {
			switch {
			case removed[id]:
				out = append(out, destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: id})
			case !sent[id]:
				out = append(out, destination.Result{Key: r.Key, Outcome: destination.NotSent})
			}
			// Sent without an answer: no result, in doubt.
		}
	}
	return out, err
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
