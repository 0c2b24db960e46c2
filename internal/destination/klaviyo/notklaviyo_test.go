package klaviyo_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/failure"
)

// TestSuccessThatIsNotKlaviyosIsNotDelivered: base_url pointing at a web
// server that answers every request 200 with HTML. The one-profile writes
// took any 2xx for a delivery, so profiles nothing wrote were counted
// written and never sent again. Now only the spec's answer (its status and
// the profile resource) is a delivery; the rest is in doubt.
func TestSuccessThatIsNotKlaviyosIsNotDelivered(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>Welcome to nginx</body></html>")
	}))
	t.Cleanup(srv.Close)
	for _, mode := range []destination.WriteMode{destination.Upsert, destination.Create} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			d, err := klaviyo.New(klaviyo.Params{BaseURL: srv.URL, APIKey: apiKey, Mode: klaviyo.ModeSingle, WriteMode: mode, MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			res, err := d.Write(t.Context(), records(3))
			if failure.CodeOf(err) != failure.DestinationUnavailable || !strings.Contains(failure.Detail(err), "check the destination's base_url") {
				t.Fatalf("Write error %v (detail %q), want destination_unavailable naming base_url", err, failure.Detail(err))
			}
			for _, r := range res {
				if r.Outcome == destination.Delivered {
					t.Fatalf("a profile was counted delivered on an HTML 200: %+v", res)
				}
			}
		})
	}
}

// TestPaymentRequiredIsAuth: a 402 (the account's plan or payment) says
// nothing of the profiles: it fails at once as destination_auth, on both
// paths, and no profile is rejected for it.
func TestPaymentRequiredIsAuth(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/vnd.api+json")
		w.WriteHeader(http.StatusPaymentRequired)
		fmt.Fprint(w, `{"errors":[{"id":"e1","status":402,"code":"payment_required","title":"Payment required.","detail":"Payment required."}]}`)
	}))
	t.Cleanup(srv.Close)
	for _, mode := range []string{klaviyo.ModeSingle, klaviyo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			d, err := klaviyo.New(klaviyo.Params{BaseURL: srv.URL, APIKey: apiKey, Mode: mode, ListID: "Xy12Ab", MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			res, err := d.Write(t.Context(), records(3))
			if failure.CodeOf(err) != failure.DestinationAuth {
				t.Fatalf("Write error %v: want %s", err, failure.DestinationAuth)
			}
			for _, r := range res {
				if r.Outcome == destination.Rejected || r.Outcome == destination.Delivered {
					t.Fatalf("results %+v: want no profile rejected or delivered", res)
				}
			}
		})
	}
}

// TestRefusalThatIsNotKlaviyosJudgesNoProfile: a 400, 409 or 422 that is
// not Klaviyo's error document (Go's "Client sent an HTTP request to an
// HTTPS server." for http:// on a TLS port, a proxy's page) rejected each
// profile with that page, and in write_mode update a 404 page to the PATCH
// counted the profile delivered as deleted at Klaviyo. Now neither judges
// a profile: the page fails destination_unavailable.
func TestRefusalThatIsNotKlaviyosJudgesNoProfile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
		mode       destination.WriteMode
	}{
		{"400 plain", "Client sent an HTTP request to an HTTPS server.\n", http.StatusBadRequest, destination.Upsert},
		{"409 html", "<html><body>Conflict</body></html>", http.StatusConflict, destination.Create},
		{"422 html", "<html><body>Unprocessable</body></html>", http.StatusUnprocessableEntity, destination.Upsert},
		{"404 html to an update", "<html><body>404 Not Found</body></html>", http.StatusNotFound, destination.Update},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if r.Method == http.MethodGet { // the update's look-up finds the profile
					w.Header().Set("Content-Type", "application/vnd.api+json")
					fmt.Fprint(w, `{"data":[{"type":"profile","id":"01P0","attributes":{"email":"user0@example.com"}}],"links":{}}`)
					return
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			d, err := klaviyo.New(klaviyo.Params{BaseURL: srv.URL, APIKey: apiKey, Mode: klaviyo.ModeSingle, WriteMode: tc.mode, MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			res, err := d.Write(t.Context(), records(1))
			if failure.CodeOf(err) != failure.DestinationUnavailable {
				t.Fatalf("Write error %v, want destination_unavailable", err)
			}
			for _, r := range res {
				if r.Outcome == destination.Rejected || r.Outcome == destination.Delivered {
					t.Fatalf("a profile was judged on a %d that is not Klaviyo's: %+v", tc.status, r)
				}
			}
		})
	}
}

// TestNotFoundEverywhereIsBaseURL: a base_url with a path that reaches no
// API of Klaviyo's, on a server answering every request with Klaviyo's own
// 404 document (a gateway in front of it, another of its APIs). The bulk
// path blamed list_id (invalid_sync_definition, counted by the breaker)
// although the list exists; a 404 to GET /api/profiles as well says the
// base_url is wrong (destination_unavailable). A 404 for the list alone
// still names list_id.
func TestNotFoundEverywhereIsBaseURL(t *testing.T) {
	t.Parallel()
	notFound := func(profilesToo bool) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/vnd.api+json")
			if !profilesToo && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/api/profiles") {
				fmt.Fprint(w, `{"data":[],"links":{}}`)
				return
			}
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"errors":[{"id":"e1","status":404,"code":"not_found","title":"Not found.","detail":"Not found.","source":{}}]}`)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	for _, tc := range []struct {
		name        string
		profilesToo bool
		code        failure.Code
		phrase      string
	}{
		{"every path", true, failure.DestinationUnavailable, "check the destination's base_url"},
		{"the list only", false, failure.InvalidSyncDefinition, "fix destination.list_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := klaviyo.New(klaviyo.Params{BaseURL: notFound(tc.profilesToo).URL + "/api", APIKey: apiKey, Mode: klaviyo.ModeBulk,
				ListID: "Xy12Ab", MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			_, err = d.Write(t.Context(), records(3))
			if failure.CodeOf(err) != tc.code || !strings.Contains(failure.Detail(err), tc.phrase) {
				t.Fatalf("Write error %v (detail %q), want %s with %q", err, failure.Detail(err), tc.code, tc.phrase)
			}
		})
	}
}
