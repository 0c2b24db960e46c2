package fakebrevo

import (
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCreateContact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		existing  []m // created first (through the proxy)
		body      any
		raw       bool // the body breaks the spec: send it straight to the fake
		wantCode  int
		wantError string // errorModel code
		wantMsg   string // substring of the message
		check     func(t *testing.T, b *bundle)
	}{
		{
			name:     "creates",
			body:     m{"email": "Ann@Example.com", "attributes": m{"firstname": "Ann"}, "listIds": []int{2, 1}, "ext_id": "u-1"},
			wantCode: http.StatusCreated,
			check: func(t *testing.T, b *bundle) {
				c := b.contact("ann@example.com")
				want := Contact{ID: 1, Email: "ann@example.com", ExtID: "u-1", Attributes: m{"FIRSTNAME": "Ann"},
					ListIDs: []int64{1, 2}, CreatedAt: epoch, ModifiedAt: epoch}
				if !reflect.DeepEqual(c, want) {
					t.Errorf("contact = %+v, want %+v", c, want)
				}
			},
		},
		{
			name:      "existing without updateEnabled is a duplicate",
			existing:  []m{{"email": "ann@example.com", "attributes": m{"A": "1"}}},
			body:      m{"email": "ANN@example.com", "attributes": m{"A": "2"}},
			wantCode:  http.StatusBadRequest,
			wantError: CodeDuplicateParameter,
			check: func(t *testing.T, b *bundle) {
				if got := b.contact("ann@example.com").Attributes["A"]; got != "1" {
					t.Errorf("attribute A = %v, want unchanged 1", got)
				}
			},
		},
		{
			name:     "existing with updateEnabled is updated",
			existing: []m{{"email": "ann@example.com", "attributes": m{"A": "1", "B": "x"}, "listIds": []int{1}}},
			body:     m{"email": "ann@example.com", "attributes": m{"A": "2"}, "listIds": []int{3}, "updateEnabled": true},
			wantCode: http.StatusNoContent,
			check: func(t *testing.T, b *bundle) {
				c := b.contact("ann@example.com")
				if !reflect.DeepEqual(c.Attributes, m{"A": "2", "B": "x"}) || !reflect.DeepEqual(c.ListIDs, []int64{1, 3}) {
					t.Errorf("contact = %+v", c)
				}
				if st := b.srv.Stats(); st.ContactsWritten != 2 || st.Contacts != 1 || st.DuplicateWrites != 0 {
					t.Errorf("stats = %+v", st)
				}
			},
		},
		{
			name:      "refused email",
			body:      m{"email": "refused@example.com"},
			wantCode:  http.StatusBadRequest,
			wantError: CodeInvalidParameter,
			wantMsg:   "Invalid email",
		},
		{
			name:      "invalid email",
			body:      m{"email": "not-an-email"},
			raw:       true,
			wantCode:  http.StatusBadRequest,
			wantError: CodeInvalidParameter,
			wantMsg:   "Invalid email",
		},
		{
			name:      "email without a dotted domain",
			body:      m{"email": "ann@localhost"},
			wantCode:  http.StatusBadRequest,
			wantError: CodeInvalidParameter,
		},
		{
			name:      "missing email",
			body:      m{"attributes": m{"A": "1"}},
			wantCode:  http.StatusBadRequest,
			wantError: CodeMissingParameter,
		},
		{
			name:      "not JSON",
			body:      "{nope",
			raw:       true,
			wantCode:  http.StatusBadRequest,
			wantError: CodeBadRequest,
		},
		{
			name:      "JSON array",
			body:      `[{"email":"ann@example.com"}]`,
			raw:       true,
			wantCode:  http.StatusBadRequest,
			wantError: CodeBadRequest,
		},
		{
			name:      "ext_id of another contact",
			existing:  []m{{"email": "ann@example.com", "ext_id": "u-1"}},
			body:      m{"email": "bob@example.com", "ext_id": "u-1"},
			wantCode:  http.StatusBadRequest,
			wantError: CodeDuplicateParameter,
			wantMsg:   "ext_id",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{RefuseEmails: []string{"Refused@example.com"}})
			for _, e := range tt.existing {
				b.mustStatus(b.do("POST", "/v3/contacts", e), http.StatusCreated)
			}
			var r resp
			if tt.raw {
				r = b.doRaw("POST", "/v3/contacts", tt.body)
			} else {
				r = b.do("POST", "/v3/contacts", tt.body)
			}
			b.mustStatus(r, tt.wantCode)
			switch {
			case tt.wantError != "":
				e := r.errCode(t)
				if e.Code != tt.wantError || !strings.Contains(e.Message, tt.wantMsg) {
					t.Errorf("error = %+v, want code %s message ~%q", e, tt.wantError, tt.wantMsg)
				}
			case tt.wantCode == http.StatusCreated:
				var out struct{ ID int64 }
				r.json(t, &out)
				if out.ID != int64(len(tt.existing)+1) {
					t.Errorf("id = %d", out.ID)
				}
			}
			if tt.check != nil {
				tt.check(t, b)
			}
		})
	}
}

func TestRefusedCountsRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{RefuseEmails: []string{"x@example.com"}})
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "x@example.com"}), http.StatusBadRequest)
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "y@example.com"}), http.StatusCreated)
	if st := b.srv.Stats(); st.Refused != 1 || st.Contacts != 1 || st.ContactsWritten != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestGetContact(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "a.b+tag@example.com", "ext_id": "ext/7",
		"attributes": m{"FIRSTNAME": "Ann", "AGE": 41, "VIP": true}, "listIds": []int{5}}), http.StatusCreated)

	tests := []struct {
		name     string
		path     string
		wantCode int
		wantErr  string
	}{
		{"email url-encoded", "/v3/contacts/" + url.PathEscape("a.b+tag@example.com"), 200, ""},
		{"email escaped at sign, upper case", "/v3/contacts/A.B%2BTAG%40EXAMPLE.COM", 200, ""},
		{"id", "/v3/contacts/1", 200, ""},
		{"contact_id", "/v3/contacts/1?identifierType=contact_id", 200, ""},
		{"email_id", "/v3/contacts/a.b%2Btag%40example.com?identifierType=email_id", 200, ""},
		{"ext_id", "/v3/contacts/" + url.PathEscape("ext/7") + "?identifierType=ext_id", 200, ""},
		{"unknown email", "/v3/contacts/nobody%40example.com", 404, CodeDocumentNotFound},
		{"unknown id", "/v3/contacts/99", 404, CodeDocumentNotFound},
		{"unknown ext_id", "/v3/contacts/ext-8?identifierType=ext_id", 404, CodeDocumentNotFound},
		{"unsupported identifierType", "/v3/contacts/1?identifierType=phone_id", 400, CodeInvalidParameter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := b.do("GET", tt.path, nil)
			b.mustStatus(r, tt.wantCode)
			if tt.wantErr != "" {
				if e := r.errCode(t); e.Code != tt.wantErr {
					t.Errorf("code = %s, want %s", e.Code, tt.wantErr)
				}
				return
			}
			var got map[string]any
			r.json(t, &got)
			want := map[string]any{
				"id": 1.0, "email": "a.b+tag@example.com", "emailBlacklisted": false, "smsBlacklisted": false,
				"createdAt": "2025-03-01T12:00:00.000Z", "modifiedAt": "2025-03-01T12:00:00.000Z",
				// ext_id shows as the EXT_ID attribute (getContactDetails has no field for it).
				"listIds": []any{5.0}, "attributes": map[string]any{"FIRSTNAME": "Ann", "AGE": 41.0, "VIP": true, "EXT_ID": "ext/7"},
				"statistics": map[string]any{},
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("contact =\n%v\nwant\n%v", got, want)
			}
		})
	}
}

func TestUpdateContact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		path     string
		body     any
		wantCode int
		wantErr  string
		check    func(t *testing.T, b *bundle)
	}{
		{
			name: "attributes, lists and blacklist", path: "/v3/contacts/ann%40example.com",
			body:     m{"attributes": m{"LASTNAME": "Lee", "FIRSTNAME": nil}, "listIds": []int{9}, "unlinkListIds": []int{1}, "emailBlacklisted": true},
			wantCode: http.StatusNoContent,
			check: func(t *testing.T, b *bundle) {
				c := b.contact("ann@example.com")
				if !reflect.DeepEqual(c.Attributes, m{"LASTNAME": "Lee"}) || !reflect.DeepEqual(c.ListIDs, []int64{2, 9}) || !c.EmailBlacklisted {
					t.Errorf("contact = %+v", c)
				}
				if !c.ModifiedAt.Equal(epoch.Add(time.Minute)) || !c.CreatedAt.Equal(epoch) {
					t.Errorf("timestamps = %v %v", c.CreatedAt, c.ModifiedAt)
				}
			},
		},
		{
			name: "by id changes the email", path: "/v3/contacts/1",
			body:     m{"attributes": m{"EMAIL": "ann.new@example.com"}},
			wantCode: http.StatusNoContent,
			check: func(t *testing.T, b *bundle) {
				if _, ok := b.srv.Contact("ann@example.com"); ok {
					t.Error("old email still stored")
				}
				if c := b.contact("ann.new@example.com"); c.ID != 1 || c.Attributes["EMAIL"] != nil {
					t.Errorf("contact = %+v", c)
				}
			},
		},
		{
			name: "email taken by another contact", path: "/v3/contacts/1",
			body:     m{"attributes": m{"EMAIL": "bob@example.com"}},
			wantCode: http.StatusBadRequest, wantErr: CodeDuplicateParameter,
		},
		{
			name: "unknown contact", path: "/v3/contacts/nobody%40example.com",
			body:     m{"attributes": m{"A": "1"}},
			wantCode: http.StatusNotFound, wantErr: CodeDocumentNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{})
			b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "attributes": m{"FIRSTNAME": "Ann"}, "listIds": []int{1, 2}}), http.StatusCreated)
			b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "bob@example.com"}), http.StatusCreated)
			b.clock.Advance(time.Minute)
			r := b.do("PUT", tt.path, tt.body)
			b.mustStatus(r, tt.wantCode)
			if tt.wantErr != "" {
				if e := r.errCode(t); e.Code != tt.wantErr {
					t.Errorf("code = %s, want %s", e.Code, tt.wantErr)
				}
			}
			if tt.check != nil {
				tt.check(t, b)
			}
		})
	}
}

func TestListContacts(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	for i := 1; i <= 5; i++ {
		lists := []int{1}
		if i%2 == 0 {
			lists = []int{2}
		}
		b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "c" + strconv.Itoa(i) + "@example.com", "listIds": lists}), http.StatusCreated)
		b.clock.Advance(time.Minute)
	}
	// Contact 1 is modified last.
	b.mustStatus(b.do("PUT", "/v3/contacts/1", m{"attributes": m{"A": "x"}}), http.StatusNoContent)

	tests := []struct {
		query     string
		wantIDs   []float64
		wantCount float64
	}{
		{"", []float64{5, 4, 3, 2, 1}, 5},
		{"?sort=asc", []float64{1, 2, 3, 4, 5}, 5},
		{"?limit=2", []float64{5, 4}, 5},
		{"?limit=2&offset=2", []float64{3, 2}, 5},
		{"?limit=2&offset=10", []float64{}, 5},
		{"?limit=1000&sort=asc&offset=4", []float64{5}, 5},
		{"?createdSince=" + url.QueryEscape(epoch.Add(3*time.Minute).Format(time.RFC3339)), []float64{5, 4}, 2},
		{"?modifiedSince=" + url.QueryEscape(epoch.Add(5*time.Minute).Format("2006-01-02T15:04:05.000Z07:00")), []float64{1}, 1},
		{"?listIds=2&sort=asc", []float64{2, 4}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			r := b.do("GET", "/v3/contacts"+tt.query, nil)
			b.mustStatus(r, http.StatusOK)
			var out struct {
				Contacts []map[string]any
				Count    float64
			}
			r.json(t, &out)
			ids := []float64{}
			for _, c := range out.Contacts {
				ids = append(ids, c["id"].(float64))
			}
			if !reflect.DeepEqual(ids, tt.wantIDs) || out.Count != tt.wantCount {
				t.Errorf("ids = %v count %v, want %v count %v", ids, out.Count, tt.wantIDs, tt.wantCount)
			}
		})
	}

	bad := []string{"?limit=1001", "?limit=x", "?sort=sideways", "?modifiedSince=yesterday", "?filter=" + url.QueryEscape(`equals(A,"x")`)}
	for _, q := range bad {
		t.Run("bad "+q, func(t *testing.T) {
			t.Parallel()
			r := b.doRaw("GET", "/v3/contacts"+q, nil)
			b.mustStatus(r, http.StatusBadRequest)
			if e := r.errCode(t); e.Code != CodeInvalidParameter {
				t.Errorf("code = %s", e.Code)
			}
		})
	}
}

func TestDuplicateWrites(t *testing.T) {
	t.Parallel()
	type step struct {
		method, path string
		body         any
		status       int
	}
	create := func(attrs m, lists ...int) step {
		return step{"POST", "/v3/contacts", m{"email": "ann@example.com", "attributes": attrs, "listIds": lists, "updateEnabled": true}, 0}
	}
	tests := []struct {
		name        string
		steps       []step
		wantWritten int64
		wantDup     int64
	}{
		{"same contact twice", []step{create(m{"A": "1"}, 1), create(m{"A": "1"}, 1)}, 2, 1},
		{"same contact three times, case-insensitive email and attribute names",
			[]step{create(m{"A": "1"}, 1), create(m{"a": "1"}, 1),
				{"POST", "/v3/contacts", m{"email": "ANN@example.com", "attributes": m{"A": "1"}, "listIds": []int{1}, "updateEnabled": true}, 204}}, 3, 2},
		{"changed attribute is not a duplicate", []step{create(m{"A": "1"}, 1), create(m{"A": "2"}, 1)}, 2, 0},
		{"new list is not a duplicate", []step{create(m{"A": "1"}, 1), create(m{"A": "1"}, 2)}, 2, 0},
		{"subset already set is a duplicate", []step{create(m{"A": "1", "B": "2"}, 1, 2), create(m{"B": "2"}, 2)}, 2, 1},
		{"numbers compare by value", []step{create(m{"N": 1}, 1), {"PUT", "/v3/contacts/ann%40example.com", `{"attributes":{"N":1.0}}`, 204}}, 2, 1},
		{"update with nothing new", []step{create(m{"A": "1"}, 1), {"PUT", "/v3/contacts/1", m{"attributes": m{"A": "1"}, "listIds": []int{1}}, 204}}, 2, 1},
		{"import twice", []step{
			{"POST", "/v3/contacts/import", m{"jsonBody": []m{{"email": "ann@example.com", "attributes": m{"A": "1"}}, {"email": "bob@example.com"}}, "listIds": []int{1}}, 202},
			{"POST", "/v3/contacts/import", m{"jsonBody": []m{{"email": "ann@example.com", "attributes": m{"A": "1"}}, {"email": "bob@example.com"}}, "listIds": []int{1}}, 202},
		}, 4, 2},
		{"refused write is not a write", []step{create(m{"A": "1"}, 1), {"POST", "/v3/contacts", m{"email": "ann@example.com", "attributes": m{"A": "1"}, "listIds": []int{1}}, 400}}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{})
			for i, s := range tt.steps {
				r := b.do(s.method, s.path, s.body)
				if s.status != 0 && r.status != s.status || r.status >= 300 && s.status < 300 {
					t.Fatalf("step %d: status %d, want %d: %s", i, r.status, s.status, r.body)
				}
			}
			st := b.srv.Stats()
			if st.ContactsWritten != tt.wantWritten || st.DuplicateWrites != tt.wantDup {
				t.Errorf("written %d duplicates %d, want %d %d", st.ContactsWritten, st.DuplicateWrites, tt.wantWritten, tt.wantDup)
			}
		})
	}
}

// TestDeleteContact: DELETE /contacts/{identifier} removes the contact (a
// later GET is 404, a second DELETE too), and the address can be created
// again.
func TestDeleteContact(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "ext_id": "7", "attributes": m{"FIRSTNAME": "Ann"}}), http.StatusCreated)
	b.mustStatus(b.do("DELETE", "/v3/contacts/ann%40example.com", nil), http.StatusNoContent)
	b.mustStatus(b.do("GET", "/v3/contacts/ann%40example.com", nil), http.StatusNotFound)
	b.mustStatus(b.do("DELETE", "/v3/contacts/ann%40example.com", nil), http.StatusNotFound)
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "ext_id": "7"}), http.StatusCreated)
	if st := b.srv.Stats(); st.Contacts != 1 {
		t.Fatalf("contacts %d, want 1", st.Contacts)
	}
}
