package fakebrevo

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSMSNumbers: Brevo keeps an SMS number as digits with its country
// code, whatever form it was written in, and gives a number to one contact
// only: a single write of another contact's number is refused, an import
// row with it is skipped and reported as duplicate_phone_id.
func TestSMSNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{ProcessDelay: time.Second})
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "attributes": m{"SMS": "+33 6 12 34 56 78"}}), http.StatusCreated)
	if got := b.contact("ann@example.com").Attributes["SMS"]; got != "33612345678" {
		t.Fatalf("stored SMS %#v, want Brevo's form 33612345678", got)
	}
	for _, w := range []struct{ method, path string }{
		{"POST", "/v3/contacts"},
		{"PUT", "/v3/contacts/bob@example.com"},
	} {
		if w.method == "PUT" {
			b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "bob@example.com"}), http.StatusCreated)
		}
		r := b.do(w.method, w.path, m{"email": "bob@example.com", "attributes": m{"SMS": "0033612345678"}, "updateEnabled": true})
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "duplicate_parameter") {
			t.Errorf("%s %s with ann's number: %d %s, want 400 duplicate_parameter", w.method, w.path, r.status, r.body)
		}
	}
	b.mustStatus(b.do("PUT", "/v3/contacts/ann@example.com", m{"attributes": m{"SMS": "+44 (0)7771 234567"}}), http.StatusNoContent)
	if got := b.contact("ann@example.com").Attributes["SMS"]; got != "447771234567" {
		t.Fatalf("stored SMS %#v, want 447771234567", got)
	}
	// Ann's old number is free again; her new one is not.
	b.mustStatus(b.do("PUT", "/v3/contacts/bob@example.com", m{"attributes": m{"SMS": "33612345678"}}), http.StatusNoContent)
	b.mustStatus(b.do("POST", "/v3/contacts/import", m{"jsonBody": []m{
		{"email": "cy@example.com", "attributes": m{"SMS": "+447771234567"}},
		{"email": "ann@example.com", "attributes": m{"SMS": "447771234567", "FIRSTNAME": "Ann"}},
	}, "listIds": []int{2}, "updateExistingContacts": true}), http.StatusAccepted)
	b.clock.Advance(time.Second)
	p := b.process(1)
	u := p.Info.Import[ReportDuplicatePhoneID]
	if u == nil {
		t.Fatalf("no duplicate_phone_id report: %+v", p.Info.Import)
	}
	if got := fetchCSV(t, *u); !reflect.DeepEqual(got, [][]string{{"EMAIL", "EXT_ID", "SMS"}, {"cy@example.com", "", "447771234567"}}) {
		t.Errorf("duplicate_phone_id report = %q", got)
	}
	if _, ok := b.srv.Contact("cy@example.com"); ok {
		t.Error("the row with ann's number was imported")
	}
	if got := b.contact("ann@example.com").Attributes["FIRSTNAME"]; got != "Ann" {
		t.Errorf("ann's own row: FIRSTNAME %#v, want Ann", got)
	}
	b.mustStatus(b.do("DELETE", "/v3/contacts/ann@example.com", nil), http.StatusNoContent)
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "cy@example.com", "attributes": m{"SMS": "447771234567"}}), http.StatusCreated)
}
