package klaviyo

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/oncesync/oncesync/internal/failure"
)

// Check reads one profile (GET /api/profiles?page[size]=1): the private key
// is accepted and Klaviyo knows the revision. Nothing is written.
// list_id cannot be checked without writing: Klaviyo's profiles API spec,
// which this package follows, has no list endpoint; a list that does not
// exist fails the first bulk import job (invalid_sync_definition).
func (d *Destination) Check(ctx context.Context) ([]string, error) {
	q := url.Values{}
	q.Set("page[size]", "1")
	_, err := d.do(ctx, request{method: http.MethodGet, path: "/api/profiles", route: "GET /api/profiles", query: q})
	var e *APIError
	switch {
	case errors.As(err, &e) && err == error(e):
		return nil, d.pageFailure(e)
	case err != nil && failure.CodeOf(err) == failure.Internal:
		return nil, failure.Wrap(failure.DestinationUnavailable, d.safe(err), "klaviyo: could not read a profile")
	case err != nil:
		return nil, err
	}
	return []string{"klaviyo: the private API key and revision " + d.revision + " are accepted (GET /api/profiles)"}, nil
}
