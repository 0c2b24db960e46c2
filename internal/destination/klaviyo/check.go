package klaviyo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oncesync/oncesync/internal/failure"
)

// Check reads one profile (GET /api/profiles?page[size]=1): the private key
// is accepted and Klaviyo knows the revision; and, with list_id, the list
// (GET /api/lists/{id}, Klaviyo's "Get List"): a list that does not exist is
// invalid_sync_definition before a run's first job finds it. Nothing is
// written.
func (d *Destination) Check(ctx context.Context) ([]string, error) {
	q := url.Values{}
	q.Set("page[size]", "1")
	_, err := d.do(ctx, request{method: http.MethodGet, path: "/api/profiles", route: "GET /api/profiles", query: q})
	if err = d.checkFailure(err, "klaviyo: could not read a profile"); err != nil {
		return nil, err
	}
	lines := []string{"klaviyo: the private API key and revision " + d.revision + " are accepted (GET /api/profiles)"}
	if d.listID == "" {
		return lines, nil
	}
	res, err := d.do(ctx, request{method: http.MethodGet, path: "/api/lists/" + url.PathEscape(d.listID), route: "GET /api/lists/{id}"})
	var e *APIError
	if errors.As(err, &e) && err == error(e) && notFound(e) {
		return nil, d.noList(e)
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
