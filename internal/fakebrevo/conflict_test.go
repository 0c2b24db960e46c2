package fakebrevo

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
)

// TestConflictAnswers: each form of Options.ConflictAnswer answers a taken
// e-mail (create without updateEnabled) and a taken ext_id (create and
// update) as conflict.go says.
func TestConflictAnswers(t *testing.T) {
	t.Parallel()
	type want struct {
		code, msg string
		idents    []string
	}
	cases := map[string][3]want{
		ConflictCurrent: {
			{CodeDuplicateParameter, msgDuplicateEmail, []string{"email"}},
			{CodeDuplicateParameter, msgDuplicateExtID, []string{"ext_id"}},
			{CodeDuplicateParameter, "Unable to update contact, ext_id is already associated with another Contact", []string{"ext_id"}},
		},
		ConflictInvalidParameter: {
			{CodeInvalidParameter, msgDuplicateEmail, []string{"email"}},
			{CodeInvalidParameter, msgDuplicateExtID, []string{"ext_id"}},
			{CodeInvalidParameter, "Unable to update contact, ext_id is already associated with another Contact", []string{"ext_id"}},
		},
		ConflictLegacy: {
			{CodeDuplicateParameter, "Contact already exist", nil},
			{CodeDuplicateParameter, msgDuplicateExtID, nil},
			{CodeDuplicateParameter, "Unable to update contact, ext_id is already associated with another Contact", nil},
		},
	}
	for form, wants := range cases {
		t.Run("form="+form, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{ConflictAnswer: form})
			b.mustStatus(b.do(http.MethodPost, "/v3/contacts", m{"email": "ann@example.com", "ext_id": "x-1"}), http.StatusCreated)
			b.mustStatus(b.do(http.MethodPost, "/v3/contacts", m{"email": "bob@example.com"}), http.StatusCreated)
			answers := []resp{
				b.do(http.MethodPost, "/v3/contacts", m{"email": "ann@example.com"}),
				b.do(http.MethodPost, "/v3/contacts", m{"email": "cy@example.com", "ext_id": "x-1", "updateEnabled": true}),
				b.do(http.MethodPut, "/v3/contacts/bob@example.com", m{"ext_id": "x-1"}),
			}
			for i, r := range answers {
				b.mustStatus(r, http.StatusBadRequest)
				e := r.errCode(t)
				var got []string
				if e.Metadata != nil {
					got = e.Metadata.DuplicateIdentifiers
				}
				if w := wants[i]; e.Code != w.code || e.Message != w.msg || !reflect.DeepEqual(got, w.idents) {
					t.Errorf("answer %d = %s; want %+v", i, r.body, w)
				}
			}
		})
	}
	if err := (Options{ConflictAnswer: "other"}).Check(); !errors.Is(err, ErrBadOptions) {
		t.Errorf("Check of an unknown form = %v, want ErrBadOptions", err)
	}
}
