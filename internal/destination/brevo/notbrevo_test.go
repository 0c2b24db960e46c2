package brevo

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// TestSuccessThatIsNotBrevosIsNotDelivered: base_url pointing at a web
// server (or a proxy's page) that answers every request 200 with HTML. The
// single path took any 2xx for a delivery, so records nothing wrote were
// counted written and never sent again. Now only Brevo's own answers (201
// with the contact's id, 204) are deliveries; the rest is in doubt, for the
// read-back to decide.
func TestSuccessThatIsNotBrevosIsNotDelivered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"html 200", "<html><body>Welcome to nginx</body></html>", http.StatusOK},
		{"201 without an id", `{"message":"ok"}`, http.StatusCreated},
		{"202", `{}`, http.StatusAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			d := newStubDest(t, srv, ModeSingle)
			recs := notSentRecords(3)
			res, err := d.Write(t.Context(), recs)
			if failure.CodeOf(err) != failure.DestinationUnavailable || !strings.Contains(failure.Detail(err), "check the destination's base_url") {
				t.Fatalf("Write error %v (detail %q), want destination_unavailable naming base_url", err, failure.Detail(err))
			}
			for _, r := range res {
				if r.Outcome == destination.Delivered {
					t.Fatalf("a record was counted delivered on a %d that is not Brevo's: %+v", tc.status, res)
				}
			}
			if got := outcomes(recs, res)[0]; got != "in doubt" {
				t.Errorf("the first record is %s, want in doubt (its request reached a server)", got)
			}
		})
	}
	// Brevo's own answers stay deliveries.
	srv, _ := brevoStub(t)
	res, err := newStubDest(t, srv, ModeSingle).Write(t.Context(), notSentRecords(2))
	if err != nil || len(res) != 2 || res[0].Outcome != destination.Delivered || res[0].Ref == "" {
		t.Fatalf("201 with an id: %v %+v", err, res)
	}
}

// TestRemovalThatIsNotBrevosIsNotDone: a removal's PUT answered 200 with
// HTML (not Brevo's 204) left the contact on the list; it was counted
// removed. Now it is in doubt, for the next run to read back.
func TestRemovalThatIsNotBrevosIsNotDone(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			fmt.Fprint(w, `{"id":7,"email":"user0@example.com","listIds":[1],"attributes":{}}`)
			return
		}
		fmt.Fprint(w, "<html>ok</html>")
	}))
	t.Cleanup(srv.Close)
	d := newStubDest(t, srv, ModeSingle)
	res, err := d.Remove(t.Context(), []destination.Removal{{Key: "k0", Handle: "user0@example.com"}})
	if failure.CodeOf(err) != failure.DestinationUnavailable || !strings.Contains(failure.Detail(err), "check the destination's base_url") {
		t.Fatalf("Remove error %v (detail %q), want destination_unavailable naming base_url", err, failure.Detail(err))
	}
	if len(res) != 0 {
		t.Fatalf("results %+v, want none (in doubt)", res)
	}
}

// TestRefusalThatIsNotBrevosJudgesNoRecord: a 4xx that is not in Brevo's
// error model (a plain-HTTP base_url on a TLS port answers Go's "Client
// sent an HTTP request to an HTTPS server.", a proxy or web server its
// own page) was judged as Brevo's: every record rejected with that page
// (the run blamed the mapping), a 404 to an update counted the record
// delivered as not found at Brevo. Now only Brevo's own {code, message}
// judges a record; any other 4xx fails the page, nothing rejected or
// skipped, and the records are read back.
func TestRefusalThatIsNotBrevosJudgesNoRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		writeMode  destination.WriteMode
		status     int
	}{
		{"400 plain", "Client sent an HTTP request to an HTTPS server.\n", destination.Upsert, http.StatusBadRequest},
		{"422 html", "<html><body>Unprocessable</body></html>", destination.Upsert, http.StatusUnprocessableEntity},
		{"404 html to an update", "<html><body>404 Not Found</body></html>", destination.Update, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			d := newStubDest(t, srv, ModeSingle)
			d.writeMode = tc.writeMode
			recs := notSentRecords(3)
			res, err := d.Write(t.Context(), recs)
			if failure.CodeOf(err) != failure.DestinationUnavailable || !strings.Contains(failure.Detail(err), "check the destination's base_url") {
				t.Fatalf("Write error %v (detail %q), want destination_unavailable naming base_url", err, failure.Detail(err))
			}
			for _, r := range res {
				if r.Outcome == destination.Rejected || r.Outcome == destination.Delivered {
					t.Fatalf("a record was judged on a %d that is not Brevo's: %+v", tc.status, r)
				}
			}
		})
	}
	// Brevo's own refusal still rejects the record.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"code":"invalid_parameter","message":"email is not valid"}`)
	}))
	t.Cleanup(srv.Close)
	res, err := newStubDest(t, srv, ModeSingle).Write(t.Context(), notSentRecords(1))
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Rejected {
		t.Fatalf("Brevo's 400: %v %+v, want one rejected", err, res)
	}
}

// TestReadBackThatIsNotBrevosFindsNoneAbsent: a read-back answered 404 by
// something at base_url other than Brevo (a gateway during a deploy, a
// proxy's page) was taken for "no such contact", and the write in doubt
// was sent again although it may have landed. Now the read-back fails and
// the records stay in doubt.
func TestReadBackThatIsNotBrevosFindsNoneAbsent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<html><body>404 Not Found</body></html>")
	}))
	t.Cleanup(srv.Close)
	landed, err := newStubDest(t, srv, ModeSingle).Verify(t.Context(), notSentRecords(2), time.Time{})
	// A 404 not in Brevo's words is a sync pointed elsewhere: the sync
	// owner's (invalid_sync_definition, counted by the breaker), not an
	// outage the operator owns.
	if err == nil || failure.CodeOf(err) != failure.InvalidSyncDefinition {
		t.Fatalf("Verify = %v, %v; want invalid_sync_definition (a 404 page that is not Brevo's proves no contact absent)", landed, err)
	}
	// It says where to look: a base_url without /v3 answers so, and
	// "brevo refused a verification request" sent a person to Brevo.
	if d := failure.Detail(err); !strings.Contains(d, "something other than Brevo's API answered HTTP 404 to GET /contacts/{identifier}") ||
		!strings.Contains(d, "check the destination's base_url (Brevo's is https://api.brevo.com/v3)") {
		t.Fatalf("detail %q, want one naming the answer and base_url", d)
	}
}

// TestUnavailableThatIsNotBrevosIsInDoubt: an egress proxy that forwarded
// the write and lost Brevo's answer (Envoy's 503 "upstream connect error or
// disconnect/reset before headers") was taken for Brevo's 503, which says
// the write was not applied: it was sent again, and again (6 requests for
// one record), a duplicate write if the first had landed. Now only Brevo's
// own 503 is retried; the proxy's leaves the record in doubt for the
// read-back.
func TestUnavailableThatIsNotBrevosIsInDoubt(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		posts.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "upstream connect error or disconnect/reset before headers. reset reason: connection termination")
	}))
	t.Cleanup(srv.Close)
	recs := notSentRecords(1)
	res, err := newStubDest(t, srv, ModeSingle).Write(t.Context(), recs)
	if failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("Write error %v, want destination_unavailable", err)
	}
	if got := outcomes(recs, res)[0]; got != "in doubt" {
		t.Errorf("the record is %s, want in doubt (the proxy may have forwarded it)", got)
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("%d requests, want 1: a write that may have landed is not resent", n)
	}
}
