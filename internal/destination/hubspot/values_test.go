package hubspot_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/hubspot"
	"github.com/oncesync/oncesync/internal/fakehubspot"
)

func contactRec(key, email string, attrs map[string]any) destination.Record {
	return destination.Record{Key: key, Data: map[string]any{"email": email, "attributes": attrs}}
}

// TestVerifyComparesByPropertyType: a text property's "02134" is not 2134
// (a zip that regained its leading zero, a phone that gained its +): a
// write of it in doubt that never landed is "not landed", and sent again,
// where comparing as numbers left HubSpot's old value forever. A number
// property's "42.0" is 42.
func TestVerifyComparesByPropertyType(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "zip", Type: "string"}, {Name: "phone", Type: "string"}}},
		func(p *hubspot.Params) { p.Properties = []string{"zip", "phone", "age"} })
	old := contactRec("k-old", "ann@example.com", map[string]any{"zip": "2134", "phone": "15551234567", "age": "42"})
	if _, err := b.dest.Write(t.Context(), []destination.Record{old}); err != nil {
		t.Fatal(err)
	}
	cur := contactRec("k-new", "ann@example.com", map[string]any{"zip": "02134", "phone": "+15551234567", "age": "42"})
	same := contactRec("k-same", "ann@example.com", map[string]any{"zip": "2134", "phone": "15551234567", "age": "42.0"})
	landed, err := b.dest.Verify(t.Context(), []destination.Record{cur, same}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := landed[cur.Key]; ok {
		t.Error("a new text value that never landed counted as landed: HubSpot would keep 2134 forever")
	}
	if _, ok := landed[same.Key]; !ok {
		t.Error("42.0 in a number property holding 42 counted as not landed")
	}
}

// TestDateProperties: HubSpot keeps a date as YYYY-MM-DD whichever accepted
// form it was sent in (ISO 8601 at midnight UTC, epoch milliseconds), and
// refuses a date that is not midnight UTC. Verify reads both forms back as
// landed, so a write in doubt is not written twice.
func TestDateProperties(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "renewal", Type: "date"}, {Name: "seen", Type: "datetime"}}},
		func(p *hubspot.Params) { p.Properties = []string{"renewal", "seen"} })
	recs := []destination.Record{
		contactRec("k-time", "t@example.com", map[string]any{"renewal": time.Date(2015, 5, 1, 0, 0, 0, 0, time.UTC), "seen": "1430476200000"}),
		contactRec("k-ms", "m@example.com", map[string]any{"renewal": float64(1430438400000), "seen": time.Date(2015, 5, 1, 10, 30, 0, 0, time.UTC)}),
		contactRec("k-noon", "n@example.com", map[string]any{"renewal": "2015-05-01T12:00:00Z"}),
	}
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		want := destination.Delivered
		if r.Key == "k-noon" {
			want = destination.Rejected
		}
		if r.Outcome != want {
			t.Errorf("%s: %+v, want %s", r.Key, r, want)
		}
	}
	if c, _ := b.fake.Contact("t@example.com"); c.Properties["renewal"] != "2015-05-01" || c.Properties["seen"] != "2015-05-01T10:30:00.000Z" {
		t.Errorf("stored %q and %q, want HubSpot's forms", c.Properties["renewal"], c.Properties["seen"])
	}
	landed, err := b.dest.Verify(t.Context(), recs[:2], time.Now())
	if err != nil || len(landed) != 2 {
		t.Errorf("verify: %v, %d of 2 landed", err, len(landed))
	}
	moved := contactRec("k-moved", "t@example.com", map[string]any{"renewal": "2015-05-02", "seen": "1430476200000"})
	if landed, _ := b.dest.Verify(t.Context(), []destination.Record{moved}, time.Now()); len(landed) != 0 {
		t.Error("another day counted as landed")
	}
}

// TestCustomIDPropertySharedEmail: with a custom id_property, a record whose
// e-mail another contact holds is refused by HubSpot (the e-mail is its
// unique contact identifier): rejected with the reason, the other contact
// untouched, never a second contact of one e-mail.
func TestCustomIDPropertySharedEmail(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "customer_id", Type: "string", Unique: true}}},
		func(p *hubspot.Params) {
			p.IDProperty = "customer_id"
			p.Properties = []string{"firstname", "customer_id"}
		})
	ann := contactRec("k-ann", "ann@example.com", map[string]any{"customer_id": "C-1", "firstname": "Ann"})
	other := contactRec("k-other", "ANN@example.com", map[string]any{"customer_id": "C-2", "firstname": "Other"})
	res, err := b.dest.Write(t.Context(), []destination.Record{ann, other})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]destination.Result{}
	for _, r := range res {
		got[r.Key] = r
	}
	if got["k-ann"].Outcome != destination.Delivered || got["k-other"].Outcome != destination.Rejected ||
		!strings.Contains(got["k-other"].Message, "already exists") {
		t.Fatalf("results %+v; want ann delivered and the other rejected as a contact that already exists", res)
	}
	if c, _ := b.fake.Contact("C-1"); c.Properties["firstname"] != "Ann" {
		t.Errorf("C-1 holds %q", c.Properties["firstname"])
	}
	if _, ok := b.fake.Contact("C-2"); ok {
		t.Error("a second contact of ann's e-mail was made")
	}
}

// TestDatetimeFinerThanMilliseconds: HubSpot keeps a datetime as epoch
// milliseconds (its timestamps FAQ), so a PostgreSQL timestamptz with
// microseconds comes back cut to the millisecond. A write of it in doubt
// that landed is landed, not written again on every read-back.
func TestDatetimeFinerThanMilliseconds(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "seen", Type: "datetime"}}},
		func(p *hubspot.Params) { p.Properties = []string{"seen"} })
	rec := contactRec("k-us", "us@example.com", map[string]any{"seen": "2026-03-29T01:30:00.123456Z"})
	if res, err := b.dest.Write(t.Context(), []destination.Record{rec}); err != nil || res[0].Outcome != destination.Delivered {
		t.Fatalf("write: %+v %v", res, err)
	}
	if landed, err := b.dest.Verify(t.Context(), []destination.Record{rec}, time.Now()); err != nil || len(landed) != 1 {
		t.Errorf("verify: %v, %d of 1 landed; HubSpot holds the instant to its millisecond", err, len(landed))
	}
	later := contactRec("k-later", "us@example.com", map[string]any{"seen": "2026-03-29T01:30:00.124Z"})
	if landed, _ := b.dest.Verify(t.Context(), []destination.Record{later}, time.Now()); len(landed) != 0 {
		t.Error("another millisecond counted as landed")
	}
}

// TestSeveralOptionsOfAnEnumeration: a list is sent as HubSpot takes several
// options of a multiple-checkboxes property ("a;b"), and since HubSpot's
// documentation does not say it keeps them in the order sent (the fake keeps
// the options' order), Verify compares them as a set: a write in doubt that
// landed is not written again.
func TestSeveralOptionsOfAnEnumeration(t *testing.T) {
	t.Parallel()
	prop, err := fakehubspot.ParseProperty("interests:checkbox=golf|tennis|chess")
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{prop}},
		func(p *hubspot.Params) { p.Properties = []string{"interests"} })
	recs := []destination.Record{
		contactRec("k-two", "ann@example.com", map[string]any{"interests": []any{"chess", "", "golf"}}),
		contactRec("k-polo", "bob@example.com", map[string]any{"interests": []any{"golf", "polo"}}),
		contactRec("k-semi", "cy@example.com", map[string]any{"interests": []any{"golf;tennis"}}),
		contactRec("k-none", "di@example.com", map[string]any{"interests": []any{}}),
	}
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]destination.Outcome{"k-two": destination.Delivered, "k-polo": destination.Rejected, "k-semi": destination.Rejected, "k-none": destination.Delivered}
	for _, r := range res {
		if r.Outcome != want[r.Key] {
			t.Errorf("%s: %+v, want %s", r.Key, r, want[r.Key])
		}
		if r.Key == "k-polo" && !strings.Contains(r.Message, "polo") {
			t.Errorf("the refusal does not name the option: %q", r.Message)
		}
	}
	if c, _ := b.fake.Contact("ann@example.com"); c.Properties["interests"] != "golf;chess" {
		t.Errorf("interests %q, want golf;chess", c.Properties["interests"])
	}
	landed, err := b.dest.Verify(t.Context(), recs[:1], time.Now())
	if _, ok := landed["k-two"]; err != nil || !ok {
		t.Errorf("verify: %v, %v: the options read back in another order counted as not landed (written twice)", err, landed)
	}
	// Text in HubSpot's own form, in another order than the options'.
	text := contactRec("k-text", "eve@example.com", map[string]any{"interests": "tennis;golf"})
	if _, err := b.dest.Write(t.Context(), []destination.Record{text}); err != nil {
		t.Fatal(err)
	}
	if landed, _ := b.dest.Verify(t.Context(), []destination.Record{text}, time.Now()); len(landed) != 1 {
		t.Error(`"tennis;golf" read back as "golf;tennis" counted as not landed (written twice)`)
	}
	fewer := contactRec("k-fewer", "ann@example.com", map[string]any{"interests": []any{"golf"}})
	if landed, _ := b.dest.Verify(t.Context(), []destination.Record{fewer}, time.Now()); len(landed) != 0 {
		t.Error("one option of two counted as landed")
	}
}

// TestNonTextValuesWithSurroundingWhitespace: HubSpot refuses a value of a
// property that is not text with white space or an invisible character at
// either end (its 2025 changelog "Enhanced Validations for Non-String
// Properties": 400 LEADING_TRAILING_WHITESPACE for the whole batch) and has
// trimmed every such value and option it held. A source's "42 ", "gold\n"
// (a char(n) column, a line read from a file) is sent as HubSpot holds it:
// delivered, in one batch, not rejected; a text property keeps its spaces;
// and a write of it in doubt reads back as landed (not written twice).
func TestNonTextValuesWithSurroundingWhitespace(t *testing.T) {
	t.Parallel()
	interests, err := fakehubspot.ParseProperty("interests:checkbox=golf|tennis|chess")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := fakehubspot.ParseProperty("plan:enumeration=gold|silver")
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{interests, plan,
		{Name: "vip", Type: "bool"}, {Name: "renewal", Type: "date"}, {Name: "nickname", Type: "string"}}},
		func(p *hubspot.Params) {
			p.Properties = []string{"age", "interests", "plan", "vip", "renewal", "nickname"}
		})
	spaced := contactRec("k-spaced", "ann@example.com", map[string]any{
		"age": " 42", "plan": "gold\u00a0\u00a0", "vip": "true\n", "renewal": "2024-05-01\r\n",
		"interests": []any{" golf", "chess\u200b"}, "nickname": " Annie ",
	})
	text := contactRec("k-text", "bob@example.com", map[string]any{"interests": "golf; tennis", "plan": "  "})
	clean := contactRec("k-clean", "cy@example.com", map[string]any{"age": "30", "plan": "silver"})
	recs := []destination.Record{spaced, text, clean}
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Errorf("%s: %+v, want delivered", r.Key, r)
		}
	}
	if n := len(b.requests("/crm/v3/objects/contacts/batch/upsert")); n != 1 {
		t.Errorf("%d batch/upsert requests, want 1 (a batch refused whole is sent again one by one)", n)
	}
	want := map[string]string{"age": "42", "plan": "gold", "vip": "true", "renewal": "2024-05-01", "interests": "golf;chess", "nickname": " Annie "}
	c, _ := b.fake.Contact("ann@example.com")
	for k, v := range want {
		if c.Properties[k] != v {
			t.Errorf("%s stored %q, want %q", k, c.Properties[k], v)
		}
	}
	if c, _ := b.fake.Contact("bob@example.com"); c.Properties["interests"] != "golf;tennis" || c.Properties["plan"] != "" {
		t.Errorf("bob: interests %q plan %q, want golf;tennis and no plan", c.Properties["interests"], c.Properties["plan"])
	}
	landed, err := b.dest.Verify(t.Context(), recs, time.Now())
	if err != nil || len(landed) != len(recs) {
		t.Errorf("verify: %v, %v: a write that landed counted as not landed (written twice)", err, landed)
	}
	// A text property's spaces are its value: "Annie" is not " Annie ".
	other := contactRec("k-other", "ann@example.com", map[string]any{"nickname": "Annie"})
	if landed, _ := b.dest.Verify(t.Context(), []destination.Record{other}, time.Now()); len(landed) != 0 {
		t.Error(`"Annie" counted as landed where HubSpot holds " Annie "`)
	}
}

// TestNumberInExponentForm: HubSpot takes a number property's value as
// digits, an optional "-" and one "." only (its changelog "A change for
// number properties in CRM APIs"), while a source gives a double precision
// column's 0.00001 as "1e-05" (PostgreSQL's output) and JSON may hold
// "1.5E+3" or "+7". Such a number is sent in plain decimal notation:
// delivered, not rejected, and a write of it in doubt reads back as landed.
// A text property's "1e-05" is text, sent as it is.
func TestNumberInExponentForm(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "code", Type: "string"}}},
		func(p *hubspot.Params) { p.Properties = []string{"age", "code"} })
	recs := []destination.Record{
		contactRec("k-small", "ann@example.com", map[string]any{"age": json.Number("1e-05"), "code": "1e-05"}),
		contactRec("k-big", "bob@example.com", map[string]any{"age": json.Number("-1.5E+3")}),
		contactRec("k-plus", "cy@example.com", map[string]any{"age": "+7"}),
		contactRec("k-huge", "di@example.com", map[string]any{"age": json.Number("1.25e+20")}),
	}
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Errorf("%s: %+v, want delivered", r.Key, r)
		}
	}
	for email, want := range map[string]string{"ann@example.com": "0.00001", "bob@example.com": "-1500", "cy@example.com": "7", "di@example.com": "125000000000000000000"} {
		if c, _ := b.fake.Contact(email); c.Properties["age"] != want {
			t.Errorf("%s: age %q, want %q", email, c.Properties["age"], want)
		}
	}
	if c, _ := b.fake.Contact("ann@example.com"); c.Properties["code"] != "1e-05" {
		t.Errorf("code %q: a text property's value is sent as it is", c.Properties["code"])
	}
	landed, err := b.dest.Verify(t.Context(), recs, time.Now())
	if err != nil || len(landed) != len(recs) {
		t.Errorf("verify: %v, %v: a write that landed counted as not landed (written twice)", err, landed)
	}
}
