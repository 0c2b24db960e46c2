package brevo_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// keyLog records the api-key header of the requests a handler got.
type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.keys = append(k.keys, r.Header.Get("api-key"))
		k.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (k *keyLog) all() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

// TestOutcomesReportOnForeignOriginGetsNoKey: Brevo serves import reports
// from its file storage; the client reads them there without its api-key.
func TestOutcomesReportOnForeignOriginGetsNoKey(t *testing.T) {
	t.Parallel()
	var (
		reports atomic.Pointer[http.Handler]
		seen    keyLog
	)
	storage := httptest.NewServer(seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*reports.Load()).ServeHTTP(w, r)
	})))
	t.Cleanup(storage.Close)
	rs := recs(5)
	b := setup(t, fakebrevo.Options{RefuseEmails: []string{emailOf(rs[2])}, ReportBaseURL: storage.URL + "/files"},
		func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	h := b.fake.Reports()
	reports.Store(&h)
	res, err := b.dest.Write(t.Context(), rs)
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(t, rs, b.settle(t, rs, res))
	if g := got[rs[2].Key]; g.Outcome != destination.Rejected {
		t.Errorf("skipped row: %+v, want rejected", g)
	}
	keys := seen.all()
	if len(keys) != 1 {
		t.Fatalf("the report origin got %d requests, want 1", len(keys))
	}
	if keys[0] != "" {
		t.Errorf("the api-key was sent to another origin")
	}
}

// TestOutcomesReportOnOwnOriginGetsKey: a report on Brevo's own origin (the
// base URL's scheme, host and port) may be read with the api-key.
func TestOutcomesReportOnOwnOriginGetsKey(t *testing.T) {
	t.Parallel()
	rs := recs(4)
	var seen keyLog
	b := &bundle{}
	b.fake = fakebrevo.New(testAccount(fakebrevo.Options{APIKey: apiKey, RefuseEmails: []string{emailOf(rs[1])}}))
	b.startProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, fakebrevo.ReportPath) {
			seen.wrap(b.fake).ServeHTTP(w, r)
			return
		}
		b.fake.ServeHTTP(w, r)
	}))
	d := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Mode: brevo.ModeBulk, ListIDs: []int64{1}, Sleep: destinationNoSleep})
	res, err := d.Write(t.Context(), rs)
	if err != nil {
		t.Fatal(err)
	}
	got, done, err := d.Outcomes(t.Context(), res[0].Ref, rs)
	if err != nil || !done {
		t.Fatalf("Outcomes = %v, %v", done, err)
	}
	if g := byKey(t, rs, got)[rs[1].Key]; g.Outcome != destination.Rejected {
		t.Errorf("skipped row: %+v", g)
	}
	if keys := seen.all(); len(keys) != 1 || keys[0] != apiKey {
		t.Errorf("report requests' api-keys = %q, want the key once", keys)
	}
}

func destinationNoSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// TestOutcomesReportRedirectIsNotFollowed: a report URL answering a
// redirect is an error; nothing is sent where it points.
func TestOutcomesReportRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(target.Close)
	rs := recs(3)
	b := &bundle{}
	b.fake = fakebrevo.New(testAccount(fakebrevo.Options{APIKey: apiKey, RefuseEmails: []string{emailOf(rs[0])}}))
	b.startProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, fakebrevo.ReportPath) {
			http.Redirect(w, r, target.URL+"/steal", http.StatusTemporaryRedirect)
			return
		}
		b.fake.ServeHTTP(w, r)
	}))
	d := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Mode: brevo.ModeBulk, ListIDs: []int64{1}, Sleep: destinationNoSleep})
	res, err := d.Write(t.Context(), rs)
	if err != nil {
		t.Fatal(err)
	}
	_, done, err := d.Outcomes(t.Context(), res[0].Ref, rs)
	if done || !errors.Is(err, brevo.ErrReport) || failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("Outcomes = done %v, %v; want destination_unavailable wrapping ErrReport", done, err)
	}
	if elapsed := elsewhere.Load(); elapsed != 0 {
		t.Errorf("the redirect was followed (%d requests)", elapsed)
	}
	if strings.Contains(err.Error(), "@") || strings.Contains(err.Error(), apiKey) || strings.Contains(err.Error(), "/_reports") {
		t.Errorf("error %q holds an address, the key or the report URL", err)
	}
}

// TestOutcomesFailedProcessIsNotSent: a process that failed whole applied
// nothing; every record is NotSent, to be sent again.
func TestOutcomesFailedProcessIsNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ImportFailRate: 1, ProcessDelay: time.Second}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	rs := recs(10)
	res, err := b.dest.Write(t.Context(), rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range byKey(t, rs, b.settle(t, rs, res)) {
		if r.Outcome != destination.NotSent {
			t.Errorf("%+v, want not sent", r)
		}
	}
	if st := b.fake.Stats(); st.ImportsFailed != 1 || st.Contacts != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestOutcomesUnknownProcess: a process Brevo does not know is an error
// (the records' fate is unknown), never a guess.
func TestOutcomesUnknownProcess(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	_, done, err := b.dest.Outcomes(t.Context(), "42", recs(2))
	if done || !errors.Is(err, brevo.ErrProcessNotFound) || failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("Outcomes = %v, %v; want destination_unavailable wrapping ErrProcessNotFound", done, err)
	}
	if _, _, err := b.dest.Outcomes(t.Context(), "not-a-process", recs(1)); err == nil {
		t.Error("Outcomes accepted a reference that is no process id")
	}
}

// TestOutcomesReportFormats: the report's columns are undocumented; rows
// are matched by e-mail (case-insensitive) whatever the separator, with or
// without a header, and the stored message holds no address even when the
// report's reason quotes one.
func TestOutcomesReportFormats(t *testing.T) {
	t.Parallel()
	rs := recs(4)
	rs[3].Data["ext_id"] = "crm-3"
	tests := []struct {
		name, report string
		want         []int
	}{
		{"semicolons", "EMAIL;EXT_ID\n" + strings.ToUpper(emailOf(rs[0])) + ";\n", []int{0}},
		{"commas, reason column", "email,error\n" + emailOf(rs[1]) + ",\"Invalid email " + emailOf(rs[1]) + "\"\n", []int{1}},
		{"no header", emailOf(rs[2]) + "\t2024-01-01\n", []int{2}},
		{"by ext_id", "EXT_ID;EMAIL\ncrm-3;\n", []int{3}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/v3/processes/7":
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"id":7,"name":"IMPORTUSER","status":"completed","info":{"import":{"invalid_emails":"http://` +
						r.Host + `/report.csv","duplicate_email_id":null}}}`))
				case r.URL.Path == "/report.csv":
					_, _ = w.Write([]byte(tt.report))
				default:
					http.NotFound(w, r)
				}
			}))
			t.Cleanup(srv.Close)
			d, err := brevo.New(brevo.Params{BaseURL: srv.URL + "/v3", APIKey: apiKey, Mode: brevo.ModeBulk, ListIDs: []int64{1}, Sleep: destinationNoSleep})
			if err != nil {
				t.Fatal(err)
			}
			got, done, err := d.Outcomes(t.Context(), "7", rs)
			if err != nil || !done {
				t.Fatalf("Outcomes = %v, %v", done, err)
			}
			want := map[string]bool{}
			for _, i := range tt.want {
				want[rs[i].Key] = true
			}
			for _, r := range byKey(t, rs, got) {
				switch {
				case want[r.Key] && r.Outcome != destination.Rejected:
					t.Errorf("%+v, want rejected", r)
				case !want[r.Key] && r.Outcome != destination.Delivered:
					t.Errorf("%+v, want delivered", r)
				case strings.Contains(r.Message, "@"):
					t.Errorf("message %q holds an address", r.Message)
				}
			}
		})
	}
}

// TestOutcomesReportTooLarge: a report is read to a bound, never whole.
func TestOutcomesReportTooLarge(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v3/processes/7" {
			_, _ = w.Write([]byte(`{"id":7,"name":"IMPORTUSER","status":"completed","info":{"import":{"invalid_emails":"http://` + r.Host + `/big.csv"}}}`))
			return
		}
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for range 17 << 10 { // 17 MiB
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	d, err := brevo.New(brevo.Params{BaseURL: srv.URL + "/v3", APIKey: apiKey, Mode: brevo.ModeBulk, ListIDs: []int64{1}, Sleep: destinationNoSleep})
	if err != nil {
		t.Fatal(err)
	}
	if _, done, err := d.Outcomes(t.Context(), "7", recs(1)); done || !errors.Is(err, brevo.ErrReport) {
		t.Fatalf("Outcomes = %v, %v; want ErrReport", done, err)
	}
}
