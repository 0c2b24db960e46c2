package fakebrevo

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestImportContacts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		existing  []m
		body      any
		raw       bool
		wantCode  int
		wantError string
		wantMsg   string
		check     func(t *testing.T, b *bundle)
	}{
		{
			name:     "imports and updates by default",
			existing: []m{{"email": "ann@example.com", "attributes": m{"FIRSTNAME": "Ann", "LASTNAME": "Old"}, "listIds": []int{1}}},
			body: m{"jsonBody": []m{
				{"email": "Ann@example.com", "attributes": m{"LASTNAME": "New", "FIRSTNAME": ""}},
				{"email": "bob@example.com", "attributes": m{"firstname": "Bob", "AGE": 30}},
			}, "listIds": []int{2}},
			wantCode: http.StatusAccepted,
			check: func(t *testing.T, b *bundle) {
				ann, bob := b.contact("ann@example.com"), b.contact("bob@example.com")
				if !reflect.DeepEqual(ann.Attributes, m{"FIRSTNAME": "Ann", "LASTNAME": "New"}) || !reflect.DeepEqual(ann.ListIDs, []int64{1, 2}) {
					t.Errorf("ann = %+v", ann)
				}
				if !reflect.DeepEqual(bob.Attributes, m{"FIRSTNAME": "Bob", "AGE": 30.0}) || !reflect.DeepEqual(bob.ListIDs, []int64{2}) || bob.ID != 2 {
					t.Errorf("bob = %+v", bob)
				}
				if st := b.srv.Stats(); st.ContactsWritten != 3 || st.Contacts != 2 {
					t.Errorf("stats = %+v", st)
				}
			},
		},
		{
			name:     "emptyContactsAttributes erases",
			existing: []m{{"email": "ann@example.com", "attributes": m{"FIRSTNAME": "Ann", "LASTNAME": "Old"}}},
			body: m{"jsonBody": []m{{"email": "ann@example.com", "attributes": m{"LASTNAME": "", "FIRSTNAME": "Ann"}}},
				"listIds": []int{2}, "emptyContactsAttributes": true},
			wantCode: http.StatusAccepted,
			check: func(t *testing.T, b *bundle) {
				if got := b.contact("ann@example.com").Attributes; !reflect.DeepEqual(got, m{"FIRSTNAME": "Ann"}) {
					t.Errorf("attributes = %v", got)
				}
			},
		},
		{
			name:     "updateExistingContacts false leaves existing contacts alone",
			existing: []m{{"email": "ann@example.com", "attributes": m{"LASTNAME": "Old"}}},
			body: m{"jsonBody": []m{{"email": "ann@example.com", "attributes": m{"LASTNAME": "New"}}, {"email": "bob@example.com"}},
				"listIds": []int{2}, "updateExistingContacts": false},
			wantCode: http.StatusAccepted,
			check: func(t *testing.T, b *bundle) {
				if got := b.contact("ann@example.com"); got.Attributes["LASTNAME"] != "Old" || len(got.ListIDs) != 0 {
					t.Errorf("ann = %+v", got)
				}
				b.contact("bob@example.com")
				if st := b.srv.Stats(); st.ContactsWritten != 2 {
					t.Errorf("written = %d, want 2", st.ContactsWritten)
				}
			},
		},
		{
			name:     "newList",
			body:     m{"jsonBody": []m{{"email": "ann@example.com"}}, "newList": m{"listName": "fresh"}, "emailBlacklist": true},
			wantCode: http.StatusAccepted,
			check: func(t *testing.T, b *bundle) {
				if c := b.contact("ann@example.com"); len(c.ListIDs) != 1 || c.ListIDs[0] < 1000 || !c.EmailBlacklisted {
					t.Errorf("ann = %+v", c)
				}
			},
		},
		{
			// Brevo accepts the import and its process skips the rows it
			// refuses; the old fake refused the whole import with a 400.
			name: "refused and invalid rows are skipped, the rest imported",
			body: m{"jsonBody": []m{{"email": "ok@example.com"}, {"email": "refused@example.com"}, {"email": "bad-address"}, {"attributes": m{"A": "1"}}},
				"listIds": []int{2}},
			wantCode: http.StatusAccepted,
			check: func(t *testing.T, b *bundle) {
				b.contact("ok@example.com")
				if _, ok := b.srv.Contact("refused@example.com"); ok {
					t.Error("a skipped row was written")
				}
				if st := b.srv.Stats(); st.ImportRowsSkipped != 3 || st.ContactsWritten != 1 || st.Refused != 0 {
					t.Errorf("stats = %+v", st)
				}
			},
		},
		{
			name:     "EXT_ID attribute sets the contact's ext_id",
			existing: []m{{"email": "ann@example.com", "ext_id": "crm-1"}},
			body: m{"jsonBody": []m{{"email": "bob@example.com", "attributes": m{"EXT_ID": "crm-2", "FIRSTNAME": "Bob"}},
				{"email": "cid@example.com", "attributes": m{"ext_id": "crm-1"}}}, "listIds": []int{2}},
			wantCode: http.StatusAccepted,
			check: func(t *testing.T, b *bundle) {
				if c := b.contact("bob@example.com"); c.ExtID != "crm-2" || !reflect.DeepEqual(c.Attributes, m{"FIRSTNAME": "Bob"}) {
					t.Errorf("bob = %+v", c)
				}
				if _, ok := b.srv.Contact("cid@example.com"); ok {
					t.Error("a row whose EXT_ID belongs to another contact was written")
				}
				if st := b.srv.Stats(); st.ImportRowsSkipped != 1 {
					t.Errorf("stats = %+v", st)
				}
			},
		},
		{
			name:     "no list",
			body:     m{"jsonBody": []m{{"email": "ann@example.com"}}},
			wantCode: http.StatusBadRequest, wantError: CodeMissingParameter,
		},
		{
			name:     "no jsonBody",
			body:     m{"listIds": []int{2}},
			wantCode: http.StatusBadRequest, wantError: CodeMissingParameter,
		},
		{
			name:     "fileBody is not supported",
			body:     m{"fileBody": "EMAIL\nann@example.com", "listIds": []int{2}},
			wantCode: http.StatusBadRequest, wantError: CodeInvalidParameter, wantMsg: "jsonBody",
		},
		{
			name:     "jsonBody not an array breaks the spec",
			body:     m{"jsonBody": "ann@example.com", "listIds": []int{2}},
			raw:      true,
			wantCode: http.StatusBadRequest, wantError: CodeBadRequest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{RefuseEmails: []string{"refused@example.com"}})
			for _, e := range tt.existing {
				b.mustStatus(b.do("POST", "/v3/contacts", e), http.StatusCreated)
			}
			var r resp
			if tt.raw {
				r = b.doRaw("POST", "/v3/contacts/import", tt.body)
			} else {
				r = b.do("POST", "/v3/contacts/import", tt.body)
			}
			b.mustStatus(r, tt.wantCode)
			if tt.wantError != "" {
				e := r.errCode(t)
				if e.Code != tt.wantError || !strings.Contains(e.Message, tt.wantMsg) {
					t.Errorf("error = %+v, want %s ~%q", e, tt.wantError, tt.wantMsg)
				}
				if strings.Contains(e.Message, "@") {
					t.Errorf("error message carries an e-mail address: %q", e.Message)
				}
			} else {
				var out struct{ ProcessID int64 }
				r.json(t, &out)
				if out.ProcessID != 1 {
					t.Errorf("processId = %d", out.ProcessID)
				}
				b.mustStatus(b.do("GET", "/v3/processes/1", nil), http.StatusOK)
			}
			if tt.check != nil {
				tt.check(t, b)
			}
		})
	}
}

func TestProcessLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{ProcessDelay: 10 * time.Second})
	body := m{"jsonBody": []m{{"email": "ann@example.com", "attributes": m{"A": "1"}}}, "listIds": []int{2}}
	b.mustStatus(b.do("POST", "/v3/contacts/import", body), http.StatusAccepted)

	status := func(id int) string {
		t.Helper()
		r := b.do("GET", fmt.Sprintf("/v3/processes/%d", id), nil)
		b.mustStatus(r, http.StatusOK)
		var p struct {
			ID           int
			Status, Name string
		}
		r.json(t, &p)
		if p.ID != id || p.Name != ProcessNameImport {
			t.Fatalf("process = %+v", p)
		}
		return p.Status
	}
	contactStatus := func() int { return b.do("GET", "/v3/contacts/ann%40example.com", nil).status }

	if got := status(1); got != ProcessQueued {
		t.Errorf("at 0s status = %s", got)
	}
	if got := contactStatus(); got != http.StatusNotFound {
		t.Errorf("contact visible before completion: %d", got)
	}
	b.clock.Advance(5 * time.Second)
	if got := status(1); got != ProcessInProcess {
		t.Errorf("at 5s status = %s", got)
	}
	if st := b.srv.Stats(); st.ContactsWritten != 0 {
		t.Errorf("written before completion: %d", st.ContactsWritten)
	}
	// A second import, queued behind the first.
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"jsonBody": []m{{"email": "ann@example.com", "attributes": m{"A": "2"}}}, "listIds": []int{2}}), http.StatusAccepted)
	b.clock.Advance(5 * time.Second)
	if got := status(1); got != ProcessCompleted {
		t.Errorf("at 10s status = %s", got)
	}
	if got := status(2); got != ProcessInProcess {
		t.Errorf("second at 5s status = %s", got)
	}
	if got := contactStatus(); got != http.StatusOK {
		t.Errorf("contact after completion: %d", got)
	}
	if c := b.contact("ann@example.com"); c.Attributes["A"] != "1" || !c.ModifiedAt.Equal(epoch.Add(10*time.Second)) {
		t.Errorf("contact = %+v", c)
	}
	b.clock.Advance(5 * time.Second)
	if c := b.contact("ann@example.com"); c.Attributes["A"] != "2" {
		t.Errorf("second import not applied in order: %+v", c)
	}

	r := b.do("GET", "/v3/processes?limit=1&sort=asc", nil)
	b.mustStatus(r, http.StatusOK)
	var list struct {
		Processes []struct {
			ID     int
			Status string
		}
		Count int
	}
	r.json(t, &list)
	if list.Count != 2 || len(list.Processes) != 1 || list.Processes[0].ID != 1 || list.Processes[0].Status != ProcessCompleted {
		t.Errorf("processes = %+v", list)
	}
	r = b.do("GET", "/v3/processes", nil)
	r.json(t, &list)
	if len(list.Processes) != 2 || list.Processes[0].ID != 2 {
		t.Errorf("processes (desc) = %+v", list)
	}

	r = b.do("GET", "/v3/processes/99", nil)
	b.mustStatus(r, http.StatusNotFound)
	if e := r.errCode(t); e.Code != CodeInvalidParameter {
		t.Errorf("code = %s", e.Code)
	}
	b.mustStatus(b.doRaw("GET", "/v3/processes/abc", nil), http.StatusBadRequest)
	b.mustStatus(b.doRaw("GET", "/v3/processes?limit=51", nil), http.StatusBadRequest)
}

// TestImportScale imports 200,000 contacts (10,000 under the race detector)
// in pages of 500, then all of them again (every write a duplicate), straight
// into the handler.
func TestImportScale(t *testing.T) {
	t.Parallel()
	total, page := 200_000, 500
	if raceEnabled || testing.Short() {
		total = 10_000
	}
	srv := New(Options{})
	bodies := make([]string, 0, total/page)
	for p := 0; p < total/page; p++ {
		var sb strings.Builder
		sb.WriteString(`{"listIds":[2],"jsonBody":[`)
		for i := 0; i < page; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"email":"user%d@example.com","attributes":{"FIRSTNAME":"U%d"}}`, p*page+i, i)
		}
		sb.WriteString(`]}`)
		bodies = append(bodies, sb.String())
	}
	start := time.Now()
	for round := 0; round < 2; round++ {
		for _, body := range bodies {
			req := httptest.NewRequest("POST", "/v3/contacts/import", strings.NewReader(body))
			req.Header.Set("api-key", "k")
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusAccepted {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	}
	st := srv.Stats()
	if st.Contacts != int64(total) || st.ContactsWritten != int64(2*total) || st.DuplicateWrites != int64(total) {
		t.Errorf("stats = contacts %d written %d duplicates %d", st.Contacts, st.ContactsWritten, st.DuplicateWrites)
	}
	t.Logf("%d imports of %d in %v", 2*total/page, page, time.Since(start))
}

// TestImportJSONBodyLimit: Brevo's spec allows a jsonBody of 10MB; the fake
// refuses a larger one (400 invalid_parameter), as it stored one of up to
// 12 MiB until 2026-12-05, and takes one just under the limit.
func TestImportJSONBodyLimit(t *testing.T) {
	t.Parallel()
	srv := New(Options{})
	body := func(size int) string {
		row := func(i int, pad int) string {
			return fmt.Sprintf(`{"email":"big%d@example.com","attributes":{"NOTE":"%s"}}`, i, strings.Repeat("x", pad))
		}
		var rows []string
		n := 2
		for i := 0; n < size; i++ {
			r := row(i, 100_000)
			if n+len(r)+1 > size {
				r = row(i, max(0, 100_000-(n+len(r)+1-size)))
			}
			rows = append(rows, r)
			n += len(r) + 1
		}
		return `{"listIds":[2],"jsonBody":[` + strings.Join(rows, ",") + `]}`
	}
	for _, tc := range []struct {
		size int
		want int
	}{{MaxJSONBodyBytes - 1000, http.StatusAccepted}, {MaxJSONBodyBytes + 1000, http.StatusBadRequest}} {
		req := httptest.NewRequest("POST", "/v3/contacts/import", strings.NewReader(body(tc.size)))
		req.Header.Set("api-key", "k")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("jsonBody of about %d bytes: status %d, want %d: %.200s", tc.size, rec.Code, tc.want, rec.Body)
		}
	}
}
