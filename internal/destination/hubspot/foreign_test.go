package hubspot_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/destinationtest"
	"github.com/oncesync/oncesync/internal/destination/hubspot"
	"github.com/oncesync/oncesync/internal/failure"
)

// TestAnswerThatIsNotHubSpotsJudgesNoRecord: something at base_url other
// than HubSpot (Go's "Client sent an HTTP request to an HTTPS server." for
// http:// on a TLS port, a proxy's page) answered 400 or 422: the batch
// was resent one contact per batch and each was rejected with that page,
// and a 200 carrying errors[] (HubSpot lists refusals in a 207 only)
// rejected the batch's one input. Now neither judges a record: the page
// fails destination_unavailable and the records are left to the read-back.
func TestAnswerThatIsNotHubSpotsJudgesNoRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"400 plain", "Client sent an HTTP request to an HTTPS server.\n", http.StatusBadRequest},
		{"422 html", "<html><body>Unprocessable</body></html>", http.StatusUnprocessableEntity},
		{"200 with errors", `{"status":"ok","errors":[{"message":"Login required"}]}`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			d, err := hubspot.New(hubspot.Params{BaseURL: srv.URL, Token: token, Sleep: destinationtest.NoSleep, RateLimit: 1e9})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 3} {
				res, err := d.Write(t.Context(), records(n))
				if failure.CodeOf(err) != failure.DestinationUnavailable {
					t.Fatalf("%d records: Write error %v, want %s", n, err, failure.DestinationUnavailable)
				}
				for _, r := range res {
					if r.Outcome == destination.Rejected || r.Outcome == destination.Delivered {
						t.Fatalf("%d records: a record was judged on an answer that is not HubSpot's: %+v", n, r)
					}
				}
			}
		})
	}
}
