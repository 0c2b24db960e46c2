package brevo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// A mirror sync (docs/guide.md#write-modes) removes a contact whose source
// row is gone by taking it off the sync's lists: the contact itself, which
// other lists, campaigns and people may use, stays in the account.

var _ destination.Remover = (*Destination)(nil)

// Handle is the contact's e-mail address, as Brevo keys it.
func (d *Destination) Handle(rec destination.Record) (string, error) {
	c := parseRecord(rec)
	if c.invalid != "" || c.email == "" {
		return "", fmt.Errorf("brevo: the record has no usable e-mail address")
	}
	return strings.ToLower(c.email), nil
}

// Remove takes each contact off the sync's lists. The contact is read
// first: one that is gone, or on none of the lists, is already removed
// (Delivered with nothing written), so a removal sent again after a lost
// answer writes nothing twice.
func (d *Destination) Remove(ctx context.Context, rms []destination.Removal) ([]destination.Result, error) {
	results := make([]destination.Result, len(rms))
	done := make([]bool, len(rms))
	maybeSent := make([]bool, len(rms))
	err := apiclient.FanOut(ctx, len(rms), d.conc, func(ctx context.Context, i int) error {
		rm := rms[i]
		got, found, err := d.getContact(ctx, rm.Handle)
		if err != nil {
			return err
		}
		if !found || !slices.ContainsFunc(got.ListIDs, func(id int64) bool { return slices.Contains(d.listIDs, id) }) {
			results[i], done[i] = destination.Result{Key: rm.Key, Outcome: destination.Delivered}, true
			return nil
		}
		resp, err := d.do(ctx, request{method: http.MethodPut, path: "/contacts/" + escapeIdentifier(rm.Handle),
			route: "PUT /contacts/{identifier}", body: marshal(updateContact{UnlinkListIDs: d.listIDs}),
			// Taking a contact off a list twice leaves it as once: a 500
			// is retried in-run rather than failing the run (an
			// independent check, 2026-12-06).
			idempotent: true})
		if apiErr, ok := err.(*APIError); ok { // do returns it bare for the caller to judge
			switch {
			case apiErr.says(http.StatusNotFound):
				// Deleted meanwhile: nothing left to take off a list.
				results[i], done[i] = destination.Result{Key: rm.Key, Outcome: destination.Delivered}, true
				return nil
			case recordLevel(apiErr):
				results[i], done[i] = destination.Result{Key: rm.Key, Outcome: destination.Rejected, Message: destination.Redact(rejection(apiErr))}, true
				return nil
			default:
				maybeSent[i] = true
				return failure.Wrap(failure.DestinationUnavailable, d.safe(apiErr), "brevo answered HTTP %d to a removal; check the destination's base_url", apiErr.Status)
			}
		}
		if err != nil {
			maybeSent[i] = !errors.Is(err, destination.ErrNotSent)
			return err
		}
		if _, ok := singleAnswer(http.MethodPut, resp); !ok {
			maybeSent[i] = true
			return failure.Wrap(failure.DestinationUnavailable, errNotBrevo,
				"brevo answered PUT /contacts/{identifier} with HTTP %d to a removal; check the destination's base_url", resp.status)
		}
		results[i], done[i] = destination.Result{Key: rm.Key, Outcome: destination.Delivered}, true
		return nil
	})
	if err != nil && failure.CodeOf(err) == failure.Internal {
		err = d.interrupted(ctx, err)
	}
	out := make([]destination.Result, 0, len(rms))
	for i, rm := range rms {
		switch {
		case done[i]:
			out = append(out, results[i])
		case err != nil && !maybeSent[i]:
			out = append(out, destination.Result{Key: rm.Key, Outcome: destination.NotSent})
		}
	}
	return out, err
}
