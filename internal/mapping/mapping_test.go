package mapping

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
)

func TestApply(t *testing.T) {
	t.Parallel()
	rec := source.Record{Fields: map[string]any{"id": "7", "email": "a@x.io", "first_name": "Ada", "n": 3, "crm": nil, "num": int64(12)}}
	tests := []struct {
		name    string
		spec    Spec
		want    map[string]any
		missing string
	}{
		{"brevo", Spec{Email: "email", ExtID: "id", Attributes: map[string]string{"FIRSTNAME": "first_name"}},
			map[string]any{"email": "a@x.io", "ext_id": "7", "attributes": map[string]any{"FIRSTNAME": "Ada"}}, ""},
		// A NULL ext_id is no identifier (it was the text "<nil>", which
		// every such row shared); others are text.
		{"null ext_id", Spec{Email: "email", ExtID: "crm"}, map[string]any{"email": "a@x.io", "ext_id": nil}, ""},
		{"number ext_id", Spec{Email: "email", ExtID: "num"}, map[string]any{"email": "a@x.io", "ext_id": "12"}, ""},
		{"fields", Spec{Fields: map[string]string{"mail": "email", "count": "n"}},
			map[string]any{"mail": "a@x.io", "count": 3}, ""},
		{"pass-through", Spec{}, map[string]any{"id": "7", "email": "a@x.io", "first_name": "Ada", "n": 3, "crm": nil, "num": int64(12)}, ""},
		{"missing attribute column", Spec{Email: "email", Attributes: map[string]string{"X": "nope"}}, nil, "nope"},
		{"missing email column", Spec{Email: "mail"}, nil, "mail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.spec.Apply(rec)
			if tt.missing != "" {
				var me *MissingColumnError
				if !errors.As(err, &me) || me.Column != tt.missing {
					t.Fatalf("want missing column %q, got %v", tt.missing, err)
				}
				// The refusal says how a JSON line without a value passes.
				if !strings.Contains(err.Error(), "null for no value") {
					t.Fatalf("message %q does not say to write null", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v want %#v", got, tt.want)
			}
		})
	}
	if id, err := Identity(rec, "id"); err != nil || id != "7" {
		t.Fatalf("identity: %q %v", id, err)
	}
	if _, err := Identity(rec, "zz"); err == nil {
		t.Fatal("identity of a missing column must fail")
	}
}

// TestIdentityMissingOrNull: a record without its identity column, and one
// whose identity is null, are told apart, and neither is called a mapped
// column (the run's detail sent people to the mapping).
func TestIdentityMissingOrNull(t *testing.T) {
	t.Parallel()
	_, err := Identity(source.Record{Fields: map[string]any{"id": "7"}}, "uid")
	if err == nil || !strings.Contains(err.Error(), `the identity column "uid" is not in the source`) {
		t.Errorf("missing: %v", err)
	}
	_, err = Identity(source.Record{Fields: map[string]any{"uid": nil}}, "uid")
	if err == nil || !strings.Contains(err.Error(), `the identity column "uid" is null or empty in this record`) {
		t.Errorf("null: %v", err)
	}

	if id, err := Identity(source.Record{Fields: map[string]any{"uid": int64(7)}}, "uid"); err != nil || id != "7" {
		t.Errorf("present: %q, %v", id, err)
	}
}
