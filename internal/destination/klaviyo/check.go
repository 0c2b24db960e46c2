package klaviyo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Check reads one profile (GET /api/profiles?page[size]=1): the private key
// is accepted and Klaviyo knows the revision; and, with list_id, the list
// (GET /api/lists/{id}, Klaviyo's "Get List"): a list that does not exist is
// invalid_sync_definition before a run's first job finds it. Nothing is
// written.
func (d *Destination) Check(ctx context.Context) ([]string, error) {
	if err := d.checkFailure(d.readAProfile(ctx), "klaviyo: could not read a profile"); err != nil {
		return nil, err
	}
	lines := []string{"klaviyo: the private API key and revision " + d.revision + " are accepted (GET /api/profiles)"}
	if d.listID == "" {
		return lines, nil
	}
	res, err := d.do(ctx, request{method: http.MethodGet, path: "/api/lists/" + url.PathEscape(d.listID), route: "GET /api/lists/{id}"})
	var e *APIError
	if errors.As(err, &e) && err == error(e) && notFound(e) {
		return nil, d.noList(ctx, e)
	}
	if err = d.checkFailure(err, "klaviyo: could not read list_id"); err != nil {
		return nil, err
	}
	var doc struct {
		Data struct {
			ID         string `json:"id"`
			Attributes struct {
				Name string `json:"name"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if json.Unmarshal(res.Body, &doc) != nil || doc.Data.ID != d.listID {
		return nil, failure.Wrap(failure.DestinationUnavailable, errNotKlaviyo,
			"klaviyo answered GET /api/lists/{id} without the list; check the destination's base_url")
	}
	return append(lines, fmt.Sprintf("klaviyo: list_id %s is the list %q (GET /api/lists/{id})", d.listID, doc.Data.Attributes.Name)), nil
}

// checkFailure is the failure Check reports for err, a request's (nil for
// none).
func (d *Destination) checkFailure(err error, what string) error {
	if err = d.readError(err); err != nil && failure.CodeOf(err) == failure.Internal {
		return failure.Wrap(failure.DestinationUnavailable, d.safe(err), "%s", what)
	}
	return err
}

// readAProfile reads one profile (GET /api/profiles, a page of one): what
// the key may read, and whether base_url reaches Klaviyo's API.
func (d *Destination) readAProfile(ctx context.Context) error {
	q := url.Values{}
	q.Set("page[size]", "1")
	_, err := d.do(ctx, request{method: http.MethodGet, path: "/api/profiles", route: "GET /api/profiles", query: q})
	return err
}

var _ destination.AccountTeller = (*Destination)(nil)

// AccountID is the account the private key reaches (GET /api/accounts: the
// one account of the key, by its id). A key without the accounts:read
// scope is answered 403: Klaviyo will not say (destination.ErrNoAccountID).
func (d *Destination) AccountID(ctx context.Context) (string, error) {
	res, err := d.do(ctx, request{method: http.MethodGet, path: "/api/accounts", route: "GET /api/accounts"})
	var e *APIError
	switch {
	case errors.As(err, &e) && e.Status == http.StatusForbidden:
		return "", destination.ErrNoAccountID // a key without accounts:read: Klaviyo will not say
	case errors.As(err, &e) && err == error(e):
		return "", destination.ErrNoAccountID // another 4xx: not an answer to trust
	}
	if err = d.checkFailure(err, "klaviyo: could not read the account"); err != nil {
		return "", err
	}
	var doc struct {
		Data []struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(res.Body, &doc) != nil || len(doc.Data) != 1 || doc.Data[0].Type != "account" || doc.Data[0].ID == "" {
		return "", destination.ErrNoAccountID
	}
	return "klaviyo account " + doc.Data[0].ID, nil
}
