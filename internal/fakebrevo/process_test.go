package fakebrevo

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// processView is getProcess as a client decodes it.
type processView struct {
	ID     int64
	Status string
	Name   string
	Info   *struct {
		Import map[string]*string
	}
}

func (b *bundle) process(id int64) processView {
	b.t.Helper()
	r := b.do("GET", fmt.Sprintf("/v3/processes/%d", id), nil)
	b.mustStatus(r, http.StatusOK)
	var p processView
	r.json(b.t, &p)
	return p
}

// fetchCSV reads a report with no api-key and returns its rows.
func fetchCSV(t *testing.T, u string) [][]string {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET report: %d %s", res.StatusCode, body)
	}
	cr := csv.NewReader(strings.NewReader(string(body)))
	cr.Comma = ';'
	rows, err := cr.ReadAll()
	if err != nil {
		t.Fatalf("report %q: %v", body, err)
	}
	return rows
}

// TestImportSkipsRefusedRowsAndReportsThem: the import is accepted (202),
// processed after its delay, and the completed process lists the rows it
// skipped in info.import reports, as Brevo documents; every response
// conforms to swagger.yaml (setup's proxy checks them).
func TestImportSkipsRefusedRowsAndReportsThem(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{RefuseEmails: []string{"refused@example.com"}, ProcessDelay: 10 * time.Second})
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "ext_id": "crm-1"}), http.StatusCreated)
	body := m{"listIds": []int{2}, "jsonBody": []m{
		{"email": "ok@example.com", "attributes": m{"FIRSTNAME": "Ok"}},
		{"email": "Refused@example.com"},
		{"email": "not-an-address"},
		{"email": "dup@example.com", "attributes": m{"EXT_ID": "crm-1"}},
	}}
	r := b.do("POST", "/v3/contacts/import", body)
	b.mustStatus(r, http.StatusAccepted)

	if p := b.process(1); p.Status != ProcessQueued || p.Info != nil {
		t.Errorf("at 0s: %+v, want queued without info", p)
	}
	b.clock.Advance(5 * time.Second)
	if p := b.process(1); p.Status != ProcessInProcess || p.Info != nil {
		t.Errorf("at 5s: %+v, want in_process without info", p)
	}
	b.clock.Advance(5 * time.Second)
	p := b.process(1)
	if p.Status != ProcessCompleted || p.Name != ProcessNameImport || p.Info == nil {
		t.Fatalf("at 10s: %+v, want a completed IMPORTUSER with info", p)
	}
	wantKinds := []string{"invalid_emails", "duplicate_contact_id", "duplicate_ext_id", "duplicate_email_id",
		"duplicate_phone_id", "duplicate_whatsapp_id", "duplicate_landline_number_id"}
	for _, k := range wantKinds {
		u, ok := p.Info.Import[k]
		switch {
		case !ok:
			t.Errorf("info.import lacks %s", k)
		case (k == ReportInvalidEmails || k == ReportDuplicateExtID) && u == nil:
			t.Errorf("info.import.%s is null, want a report URL", k)
		case k != ReportInvalidEmails && k != ReportDuplicateExtID && u != nil:
			t.Errorf("info.import.%s = %q, want null", k, *u)
		}
	}
	inv := *p.Info.Import[ReportInvalidEmails]
	if !strings.HasPrefix(inv, b.api+ReportPath+"/1/") {
		t.Errorf("report URL %q, want one on the API's own origin under %s", inv, ReportPath)
	}
	if got := fetchCSV(t, inv); !reflect.DeepEqual(got, [][]string{{"EMAIL", "EXT_ID", "SMS"}, {"refused@example.com", "", ""}, {"not-an-address", "", ""}}) {
		t.Errorf("invalid_emails report = %q", got)
	}
	if got := fetchCSV(t, *p.Info.Import[ReportDuplicateExtID]); !reflect.DeepEqual(got, [][]string{{"EMAIL", "EXT_ID", "SMS"}, {"dup@example.com", "crm-1", ""}}) {
		t.Errorf("duplicate_ext_id report = %q", got)
	}
	b.contact("ok@example.com")
	for _, e := range []string{"refused@example.com", "dup@example.com"} {
		if _, ok := b.srv.Contact(e); ok {
			t.Errorf("skipped row %s was written", e)
		}
	}
	st := b.srv.Stats()
	if st.ImportRowsSkipped != 3 || st.ReportRequests != 2 || st.ImportsFailed != 0 || st.Refused != 0 {
		t.Errorf("stats = %+v", st)
	}
	// GET /processes shows the same.
	r = b.do("GET", "/v3/processes", nil)
	var list struct{ Processes []processView }
	r.json(t, &list)
	if len(list.Processes) != 1 || list.Processes[0].Info == nil || *list.Processes[0].Info.Import[ReportInvalidEmails] != inv {
		t.Errorf("processes = %+v", list)
	}
	// An unknown report is a 404.
	if res, err := http.Get(b.api + ReportPath + "/1/duplicate_email_id.csv"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown report: %v %v", res, err)
	}
}

// TestImportReportsOnAnotherOrigin: with ReportBaseURL the report URLs point
// at another server (Server.Reports), which needs no api-key.
func TestImportReportsOnAnotherOrigin(t *testing.T) {
	t.Parallel()
	var (
		h    atomic.Pointer[http.Handler]
		mu   sync.Mutex
		keys []string
	)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("api-key"))
		mu.Unlock()
		(*h.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	b := setup(t, Options{RefuseEmails: []string{"refused@example.com"}, ReportBaseURL: other.URL + "/files/"})
	reports := b.srv.Reports()
	h.Store(&reports)
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"listIds": []int{2},
		"jsonBody": []m{{"email": "ok@example.com"}, {"email": "refused@example.com"}}}), http.StatusAccepted)
	p := b.process(1)
	if p.Status != ProcessCompleted || p.Info == nil || p.Info.Import[ReportInvalidEmails] == nil {
		t.Fatalf("process = %+v", p)
	}
	u := *p.Info.Import[ReportInvalidEmails]
	if want := other.URL + "/files/1/invalid_emails.csv"; u != want {
		t.Fatalf("report URL %q, want %q", u, want)
	}
	if got := fetchCSV(t, u); len(got) != 2 || got[1][0] != "refused@example.com" {
		t.Errorf("report = %q", got)
	}
	if res, err := http.Get(other.URL + "/v3/contacts"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("the report origin serves the API: %v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != "" {
		t.Errorf("api-keys seen by the report origin: %q", keys)
	}
}

// TestImportFailsWhole: ImportFailRate makes a process fail: status failed,
// no info, nothing written.
func TestImportFailsWhole(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{ImportFailRate: 1, ProcessDelay: time.Second})
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"listIds": []int{2},
		"jsonBody": []m{{"email": "ok@example.com"}, {"email": "bad"}}}), http.StatusAccepted)
	if p := b.process(1); p.Status != ProcessQueued {
		t.Errorf("before the delay: %+v", p)
	}
	b.clock.Advance(time.Second)
	if p := b.process(1); p.Status != ProcessFailed || p.Info != nil {
		t.Errorf("process = %+v, want failed without info", p)
	}
	if _, ok := b.srv.Contact("ok@example.com"); ok {
		t.Error("a failed import wrote a contact")
	}
	if st := b.srv.Stats(); st.ImportsFailed != 1 || st.ContactsWritten != 0 || st.ImportRowsSkipped != 0 {
		t.Errorf("stats = %+v", st)
	}
}

// TestImportSkipRate skips a share of valid rows and reports exactly those.
func TestImportSkipRate(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{ImportSkipRate: 0.3, Seed: 5})
	rows := make([]m, 100)
	for i := range rows {
		rows[i] = m{"email": fmt.Sprintf("u%d@example.com", i)}
	}
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"listIds": []int{2}, "jsonBody": rows}), http.StatusAccepted)
	st := b.srv.Stats()
	if st.ImportRowsSkipped == 0 || st.ImportRowsSkipped == 100 || st.Contacts != 100-st.ImportRowsSkipped {
		t.Fatalf("stats = %+v", st)
	}
	p := b.process(1)
	report := fetchCSV(t, *p.Info.Import[ReportInvalidEmails])
	if int64(len(report)-1) != st.ImportRowsSkipped {
		t.Fatalf("report has %d rows for %d skipped", len(report)-1, st.ImportRowsSkipped)
	}
	for _, row := range report[1:] {
		if _, ok := b.srv.Contact(row[0]); ok {
			t.Errorf("reported row %s was written", row[0])
		}
	}
}

// TestLongImportDoesNotHoldShortOnes: with ImportRowDelay a person's large
// import runs long while a later small import completes on its own time.
func TestLongImportDoesNotHoldShortOnes(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{ProcessDelay: time.Second, ImportRowDelay: time.Second})
	big := make([]m, 100)
	for i := range big {
		big[i] = m{"email": fmt.Sprintf("big%d@example.com", i)}
	}
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"listIds": []int{2}, "jsonBody": big}), http.StatusAccepted)
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"listIds": []int{2}, "jsonBody": []m{{"email": "small@example.com"}}}), http.StatusAccepted)
	b.clock.Advance(2 * time.Second)
	if p1, p2 := b.process(1), b.process(2); p1.Status != ProcessQueued || p2.Status != ProcessCompleted {
		t.Errorf("at 2s: %s, %s; want queued, completed", p1.Status, p2.Status)
	}
	b.contact("small@example.com")
	b.clock.Advance(60 * time.Second)
	if p := b.process(1); p.Status != ProcessInProcess {
		t.Errorf("at 62s: %s, want in_process", p.Status)
	}
	b.clock.Advance(40 * time.Second)
	if p := b.process(1); p.Status != ProcessCompleted {
		t.Errorf("at 102s: %s, want completed", p.Status)
	}
	if st := b.srv.Stats(); st.Contacts != 101 {
		t.Errorf("contacts = %d", st.Contacts)
	}
}

// TestServeReportListen: `fake-brevo --report-listen` serves the reports on a
// second address, and the process's URLs point there.
func TestServeReportListen(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, "127.0.0.1:0", Options{APIKey: "k", RefuseEmails: []string{"no@example.com"}, ReportListen: "127.0.0.1:0"},
			func(addr string) { addrc <- addr })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("Serve: %v", err)
	}
	send := func(method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("api-key", "k")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := send("POST", "/v3/contacts/import", `{"listIds":[2],"jsonBody":[{"email":"no@example.com"}]}`)
	res.Body.Close()
	res = send("GET", "/v3/processes/1", "")
	var p processView
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil || p.Info == nil || p.Info.Import[ReportInvalidEmails] == nil {
		t.Fatalf("process %+v: %v", p, err)
	}
	res.Body.Close()
	u := *p.Info.Import[ReportInvalidEmails]
	if strings.Contains(u, addr) {
		t.Errorf("report URL %q is on the API's address", u)
	}
	if got := fetchCSV(t, u); len(got) != 2 {
		t.Errorf("report = %q", got)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
}
