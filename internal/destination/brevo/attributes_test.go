package brevo_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// TestMappedAttributeTheAccountLacks: Brevo drops the values of an attribute
// the account does not define and answers as if it had written them. Check
// names the attribute, and a write refuses the page before sending any of
// it, on both paths; with the attribute created, the same write lands.
func TestMappedAttributeTheAccountLacks(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{Attributes: fakebrevo.DefaultAttributes}, func(p *brevo.Params) {
				p.Mode = mode
				p.Attributes = []string{"FIRSTNAME", "PLAN"}
			})
			ctx := context.Background()
			if _, err := b.dest.Check(ctx); failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(err.Error(), "attribute PLAN does not exist") {
				t.Fatalf("check: %v", err)
			}
			rs := []destination.Record{rec(0, map[string]any{"FIRSTNAME": "Ann", "PLAN": "gold"})}
			res, err := b.dest.Write(ctx, rs)
			if failure.CodeOf(err) != failure.InvalidSyncDefinition {
				t.Fatalf("write: %v", err)
			}
			if len(res) != 1 || res[0].Outcome != destination.NotSent {
				t.Fatalf("write results %+v, want the record not sent", res)
			}
			if st := b.fake.Stats(); st.ContactsWritten != 0 || st.ByRoute["POST /v3/contacts"]+st.ByRoute["POST /v3/contacts/import"] != 0 {
				t.Fatalf("a write reached the fake: %+v", st.ByRoute)
			}

			b2 := setup(t, fakebrevo.Options{Attributes: fakebrevo.WithAttributes("PLAN")}, func(p *brevo.Params) {
				p.Mode = mode
				p.Attributes = []string{"FIRSTNAME", "plan"}
			})
			checked, err := b2.dest.Check(ctx)
			if err != nil || !strings.Contains(strings.Join(checked, "\n"), "mapped attributes exist: FIRSTNAME (text), plan (text)") {
				t.Fatalf("check with the attribute: %v %q", err, checked)
			}
			if _, err := b2.dest.Write(ctx, rs); err != nil {
				t.Fatal(err)
			}
			if mode == brevo.ModeBulk {
				b2.clock.Advance(time.Second)
			}
			if c, ok := b2.fake.Contact(emailOf(rs[0])); !ok || c.Attributes["PLAN"] != "gold" {
				t.Fatalf("contact %+v (%v), want PLAN gold", c, ok)
			}
		})
	}
}

// TestComputedAttributeIsRefused: calculated and global attributes are
// Brevo's own to compute.
func TestComputedAttributeIsRefused(t *testing.T) {
	t.Parallel()
	attrs := append(fakebrevo.WithAttributes(), fakebrevo.Attribute{Name: "ORDERS", Category: "calculated", Type: "float"})
	b := setup(t, fakebrevo.Options{Attributes: attrs}, func(p *brevo.Params) { p.Attributes = []string{"ORDERS"} })
	if _, err := b.dest.Check(context.Background()); failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(err.Error(), "calculated attribute") {
		t.Fatalf("check: %v", err)
	}
}

// TestServerWithoutAttributeList: a Brevo-compatible server that does not
// list attributes (404) is written to as before; check says it could not
// check them.
func TestServerWithoutAttributeList(t *testing.T) {
	t.Parallel()
	fake := fakebrevo.New(testAccount(fakebrevo.Options{APIKey: apiKey}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/contacts/attributes") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"document_not_found","message":"not here"}`))
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	d, err := brevo.New(brevo.Params{BaseURL: srv.URL + "/v3", APIKey: apiKey, ListIDs: []int64{2}, Attributes: []string{"FIRSTNAME", "PLAN"}, RateLimit: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	checked, err := d.Check(context.Background())
	// A notice, not a check that passed: `oncesync check` prints it "--".
	if err != nil || len(checked) == 0 || !strings.HasPrefix(checked[len(checked)-1], destination.NotChecked) {
		t.Fatalf("check: %v %q", err, checked)
	}
	rs := []destination.Record{rec(0, map[string]any{"FIRSTNAME": "Ann"})}
	res, err := d.Write(context.Background(), rs)
	if err != nil || res[0].Outcome != destination.Delivered {
		t.Fatalf("write: %v %+v", err, res)
	}
}

// TestTypedAttributeValues: Brevo drops a value that does not match its
// attribute's type. A value with an unambiguous form of the type is sent in
// it (a numeric string as a number, "true" and 1 as true), so that it lands;
// one without is rejected, naming the attribute and not the value, on both
// paths, and the rest of the page lands. Verify finds what was sent.
func TestTypedAttributeValues(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setupTyped(t, mode)
			ctx := context.Background()
			checked, err := b.dest.Check(ctx)
			if err != nil || !strings.Contains(strings.Join(checked, "\n"), "BIRTHDAY (date), SCORE (float), VIP (boolean)") {
				t.Fatalf("check: %v %q", err, checked)
			}
			rs := []destination.Record{
				rec(0, map[string]any{"BIRTHDAY": "1990-05-17", "SCORE": "12.5", "VIP": "true"}),
				rec(1, map[string]any{"BIRTHDAY": "2001-01-31", "SCORE": json.Number("7"), "VIP": json.Number("0")}),
				rec(2, map[string]any{"BIRTHDAY": "31/01/2001", "SCORE": 1, "VIP": true}),
				rec(3, map[string]any{"BIRTHDAY": "", "SCORE": "twelve", "VIP": nil}),
				rec(4, map[string]any{"BIRTHDAY": nil, "SCORE": nil, "VIP": "maybe"}),
				// No double holds 1E400 (a JSONL value): Brevo has no form for it.
				rec(5, map[string]any{"SCORE": json.Number("1E400")}),
				rec(6, map[string]any{"SCORE": "1,5"}),
			}
			res, err := b.dest.Write(ctx, rs)
			if err != nil {
				t.Fatal(err)
			}
			if mode == brevo.ModeBulk {
				b.clock.Advance(time.Second)
				if res[0].Outcome != destination.Accepted {
					t.Fatalf("record 0: %+v, want accepted by an import", res[0])
				}
				out, done, err := b.dest.Outcomes(ctx, res[0].Ref, rs[:2])
				if err != nil || !done {
					t.Fatalf("outcomes: %v, done %v", err, done)
				}
				copy(res, out)
			}
			for i, want := range []string{"", "", "BIRTHDAY is a date attribute", "SCORE is a float attribute", "VIP is a boolean attribute",
				"SCORE is a float attribute", "it has a comma: numbers are written with a decimal point"} {
				switch {
				case want == "" && res[i].Outcome != destination.Delivered:
					t.Errorf("record %d: %+v, want delivered", i, res[i])
				case want != "" && (res[i].Outcome != destination.Rejected || !strings.Contains(res[i].Message, want)):
					t.Errorf("record %d: %+v, want rejected: %s", i, res[i], want)
				case strings.Contains(res[i].Message, "31/01") || strings.Contains(res[i].Message, "twelve") || strings.Contains(res[i].Message, "maybe"):
					t.Errorf("record %d: the message holds the value: %s", i, res[i].Message)
				}
			}
			for i, want := range []map[string]any{
				{"BIRTHDAY": "1990-05-17", "SCORE": 12.5, "VIP": true},
				{"BIRTHDAY": "2001-01-31", "SCORE": 7.0, "VIP": false},
			} {
				c, ok := b.fake.Contact(emailOf(rs[i]))
				if !ok {
					t.Fatalf("record %d not written", i)
				}
				for k, v := range want {
					if c.Attributes[k] != v {
						t.Errorf("record %d: %s = %#v, want %#v", i, k, c.Attributes[k], v)
					}
				}
			}
			if st := b.fake.Stats(); st.ValuesDropped != 0 {
				t.Errorf("the fake dropped %d values", st.ValuesDropped)
			}
			landed, err := b.dest.Verify(ctx, rs[:2], time.Time{})
			if err != nil || len(landed) != 2 {
				t.Errorf("verify: %v, %d of 2 landed", err, len(landed))
			}
		})
	}
}

// TestJudgeSendsNothing: a dry run's Judge refuses what a write would
// refuse before sending, without a single request (a dry run reads only the
// source and the ledger), so it does not check attribute types.
func TestJudgeSendsNothing(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	d, err := brevo.New(brevo.Params{BaseURL: srv.URL + "/v3", APIKey: apiKey, ListIDs: []int64{2}, Attributes: []string{"FIRSTNAME", "BIRTHDAY"}, RateLimit: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	rs := []destination.Record{rec(0, map[string]any{"FIRSTNAME": "Ann", "BIRTHDAY": "17/05/1990"}), rec(1, nil)}
	rs[1].Data["email"] = "not-an-address"
	refused, err := d.Judge(context.Background(), rs)
	if err != nil || len(refused) != 2 || refused[0] != "" || !strings.Contains(refused[1], "invalid email address") {
		t.Fatalf("Judge = %q, %v", refused, err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("Judge sent %d requests", n)
	}
}

// TestClearedTypedAttributes: a source that empties a date, float or
// boolean attribute ("" from a CSV cell) erases it in Brevo on both paths.
// Brevo ignores "" in a typed attribute ("Values that don't match the
// attribute type ... will be ignored"), so the single path sends null; the
// import erases it with emptyContactsAttributes.
func TestClearedTypedAttributes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setupTyped(t, mode)
			ctx := context.Background()
			write := func(r destination.Record) destination.Result {
				t.Helper()
				res, err := b.dest.Write(ctx, []destination.Record{r})
				if err != nil {
					t.Fatal(err)
				}
				return b.settle(t, []destination.Record{r}, res)[0]
			}
			full := rec(0, map[string]any{"BIRTHDAY": "1990-05-17", "SCORE": "12", "VIP": "true"})
			if res := write(full); res.Outcome != destination.Delivered {
				t.Fatalf("full: %+v", res)
			}
			cleared := rec(0, map[string]any{"BIRTHDAY": "", "SCORE": "", "VIP": ""})
			cleared.Key = "cleared"
			if res := write(cleared); res.Outcome != destination.Delivered {
				t.Fatalf("cleared: %+v", res)
			}
			c, _ := b.fake.Contact(emailOf(cleared))
			for _, k := range []string{"BIRTHDAY", "SCORE", "VIP"} {
				if v, ok := c.Attributes[k]; ok {
					t.Errorf("%s = %#v after the source emptied it, want erased", k, v)
				}
			}
			if st := b.fake.Stats(); st.ValuesDropped != 0 {
				t.Errorf("the fake dropped %d values", st.ValuesDropped)
			}
			if landed, err := b.dest.Verify(ctx, []destination.Record{cleared}, time.Time{}); err != nil || len(landed) != 1 {
				t.Errorf("verify the cleared record: %v, %d of 1 landed", err, len(landed))
			}
			if landed, err := b.dest.Verify(ctx, []destination.Record{full}, time.Time{}); err != nil || len(landed) != 0 {
				t.Errorf("verify the full record against the erased contact: %v, %d of 1 landed", err, len(landed))
			}
		})
	}
}

// setupTyped is a destination in mode mapping BIRTHDAY (date), SCORE (float)
// and VIP (boolean), attributes of the fake's account.
func setupTyped(t *testing.T, mode string) *bundle {
	t.Helper()
	attrs := append(fakebrevo.WithAttributes(),
		fakebrevo.Attribute{Name: "BIRTHDAY", Category: "normal", Type: "date"},
		fakebrevo.Attribute{Name: "SCORE", Category: "normal", Type: "float"},
		fakebrevo.Attribute{Name: "VIP", Category: "normal", Type: "boolean"})
	return setup(t, fakebrevo.Options{Attributes: attrs}, func(p *brevo.Params) {
		p.Mode = mode
		p.Attributes = []string{"BIRTHDAY", "SCORE", "VIP"}
	})
}

// TestEveryMissingAttributeIsNamed: check names every mapped attribute the
// account lacks at once, so that one round of creating them in Brevo is
// enough.
func TestEveryMissingAttributeIsNamed(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{Attributes: fakebrevo.DefaultAttributes}, func(p *brevo.Params) {
		p.Attributes = []string{"FIRSTNAME", "SCORE", "PLAN"}
	})
	_, err := b.dest.Check(context.Background())
	if failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(err.Error(), "attributes PLAN, SCORE do not exist in this account") {
		t.Fatalf("check: %v; want both missing attributes named", err)
	}
}

// TestLocalNamesAreSuggested: an account created in French names its
// first- and last-name attributes PRENOM and NOM, so a mapping to FIRSTNAME
// is refused; the refusal says which attribute to map instead.
func TestLocalNamesAreSuggested(t *testing.T) {
	t.Parallel()
	attrs := []fakebrevo.Attribute{{Name: "EMAIL", Category: "normal", Type: "text"},
		{Name: "PRENOM", Category: "normal", Type: "text"}, {Name: "NOM", Category: "normal", Type: "text"}}
	b := setup(t, fakebrevo.Options{Attributes: attrs}, func(p *brevo.Params) {
		p.Attributes = []string{"FIRSTNAME", "LASTNAME", "PLAN"}
	})
	_, err := b.dest.Check(context.Background())
	if failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(err.Error(), "map PRENOM for FIRSTNAME, NOM for LASTNAME)") {
		t.Fatalf("check: %v; want PRENOM and NOM suggested", err)
	}
	b = setup(t, fakebrevo.Options{Attributes: fakebrevo.DefaultAttributes}, func(p *brevo.Params) {
		p.Attributes = []string{"PLAN"}
	})
	if _, err := b.dest.Check(context.Background()); err == nil || strings.Contains(err.Error(), "language") {
		t.Fatalf("check: %v; want PLAN missing, nothing suggested", err)
	}
}

// TestNumbersInTextAttributesKeepTheirDigits: Brevo keeps a JSON number as
// a double (the fake too), so an id above 2^53 mapped to a text attribute
// (a bigint customer id) lost its last digits at the destination, and a
// read-back of the write never matched it. A number, boolean, object or
// array of a text attribute is sent as its text (an object as its JSON: a
// value not of the attribute's type is one Brevo may ignore), which Brevo
// keeps as written; a float
// attribute holds the double nearest a value with more digits than a
// double has, which a read-back takes as landed.
func TestNumbersInTextAttributesKeepTheirDigits(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			attrs := append(fakebrevo.WithAttributes("CUSTOMER_ID", "FLAG"),
				fakebrevo.Attribute{Name: "SCORE", Category: "normal", Type: "float"})
			b := setup(t, fakebrevo.Options{Attributes: attrs}, func(p *brevo.Params) {
				p.Mode = mode
				p.Attributes = []string{"CUSTOMER_ID", "FLAG", "SCORE"}
			})
			ctx := context.Background()
			rs := []destination.Record{
				rec(0, map[string]any{"CUSTOMER_ID": int64(9007199254740993), "FLAG": true, "SCORE": json.Number("0.12345678901234567890123")}),
				rec(1, map[string]any{"CUSTOMER_ID": json.Number("12345678901234567890123"), "FLAG": json.Number("1e21"), "SCORE": json.Number("9007199254740993")}),
				rec(2, map[string]any{"CUSTOMER_ID": map[string]any{"b": json.Number("1"), "a": []any{"x"}}, "FLAG": []any{"x", true}}),
			}
			res, err := b.dest.Write(ctx, rs)
			if err != nil {
				t.Fatal(err)
			}
			if mode == brevo.ModeBulk {
				b.clock.Advance(time.Second)
				if res, _, err = b.dest.Outcomes(ctx, res[0].Ref, rs); err != nil {
					t.Fatal(err)
				}
			}
			for i, r := range res {
				if r.Outcome != destination.Delivered {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
			for i, want := range []map[string]any{
				{"CUSTOMER_ID": "9007199254740993", "FLAG": "true"},
				{"CUSTOMER_ID": "12345678901234567890123", "FLAG": "1e21"},
				{"CUSTOMER_ID": `{"a":["x"],"b":1}`, "FLAG": `["x",true]`},
			} {
				c, _ := b.fake.Contact(emailOf(rs[i]))
				for k, v := range want {
					if c.Attributes[k] != v {
						t.Errorf("record %d: Brevo holds %s = %#v, want %#v", i, k, c.Attributes[k], v)
					}
				}
			}
			landed, err := b.dest.Verify(ctx, rs, time.Time{})
			if err != nil || len(landed) != 3 {
				t.Errorf("verify: %v, %d of 3 landed", err, len(landed))
			}
			other := rec(0, map[string]any{"CUSTOMER_ID": int64(9007199254740995), "FLAG": true, "SCORE": json.Number("0.12345678901234567890123")})
			other.Key = "k-other"
			if landed, _ := b.dest.Verify(ctx, []destination.Record{other}, time.Time{}); len(landed) != 0 {
				t.Error("another id counted as landed")
			}
		})
	}
}

// TestCheckNamesAWrongBaseURL: a base_url without /v3 answers "404 page not
// found" to GET /account; check says to look at base_url, as a run does.
func TestCheckNamesAWrongBaseURL(t *testing.T) {
	t.Parallel()
	fake := fakebrevo.New(testAccount(fakebrevo.Options{APIKey: apiKey}))
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	d, err := brevo.New(brevo.Params{BaseURL: srv.URL, APIKey: apiKey, Mode: brevo.ModeSingle, RateLimit: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	_, err = d.Check(context.Background())
	if failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(failure.Detail(err), "check the destination's base_url") {
		t.Fatalf("check with base_url lacking /v3: %v", err)
	}
}

// TestCategoryAttributeValues: a category attribute holds the number of
// one of its options (getAttributes_enumeration: "ID of Value"), and Brevo
// ignores a value not of the attribute's type. A label mapped as it is (a
// gender column holding "Women") was sent as text, which the fake, as
// Brevo may, dropped: the contact never held the value while its record
// was counted delivered. A value naming an option, by its label (exactly,
// or without case) or its number, is now sent as the option's number; any
// other is rejected, naming the attribute and its options, not the value.
func TestCategoryAttributeValues(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			attrs := append(fakebrevo.WithAttributes(), fakebrevo.CategoryAttribute("GENDER", "Men", "Women", "Kid"))
			b := setup(t, fakebrevo.Options{Attributes: attrs}, func(p *brevo.Params) {
				p.Mode = mode
				p.Attributes = []string{"GENDER"}
			})
			ctx := context.Background()
			checked, err := b.dest.Check(ctx)
			if err != nil || !strings.Contains(strings.Join(checked, "\n"), "GENDER (category: Men (1), Women (2), Kid (3))") {
				t.Fatalf("check: %v %q", err, checked)
			}
			rs := []destination.Record{
				rec(0, map[string]any{"GENDER": "Women"}),
				rec(1, map[string]any{"GENDER": "kid"}),
				rec(2, map[string]any{"GENDER": json.Number("1")}),
				rec(3, map[string]any{"GENDER": " 2 "}),
				rec(4, map[string]any{"GENDER": "Alien"}),
				rec(5, map[string]any{"GENDER": json.Number("7")}),
				rec(6, map[string]any{"GENDER": int16(3)}), // a smallint column
			}
			res, err := b.dest.Write(ctx, rs)
			if err != nil {
				t.Fatal(err)
			}
			if mode == brevo.ModeBulk {
				b.clock.Advance(time.Second)
				landed := append(slices.Clone(rs[:4]), rs[6])
				out, done, err := b.dest.Outcomes(ctx, res[0].Ref, landed)
				if err != nil || !done {
					t.Fatalf("outcomes: %v, done %v", err, done)
				}
				copy(res, out[:4])
				res[6] = out[4]
			}
			for i, want := range map[int]float64{0: 2, 1: 3, 2: 1, 3: 2, 6: 3} {
				if res[i].Outcome != destination.Delivered {
					t.Errorf("record %d: %+v, want delivered", i, res[i])
				}
				c, ok := b.fake.Contact(emailOf(rs[i]))
				if !ok || c.Attributes["GENDER"] != want {
					t.Errorf("record %d: Brevo holds GENDER %#v (written %v), want %v", i, c.Attributes["GENDER"], ok, want)
				}
			}
			for i := 4; i < 6; i++ {
				msg := res[i].Message
				if res[i].Outcome != destination.Rejected || !strings.Contains(msg, "GENDER is a category attribute") || !strings.Contains(msg, "Women (2)") {
					t.Errorf("record %d: %+v, want rejected naming GENDER and its options", i, res[i])
				}
				if strings.Contains(msg, "Alien") || strings.Contains(msg, "7") {
					t.Errorf("record %d: the message holds the value: %s", i, msg)
				}
			}
			if st := b.fake.Stats(); st.ValuesDropped != 0 {
				t.Errorf("the fake dropped %d values", st.ValuesDropped)
			}
			landed, err := b.dest.Verify(ctx, rs[:4], time.Time{})
			if err != nil || len(landed) != 4 {
				t.Errorf("verify: %v, %d of 4 landed", err, len(landed))
			}
			// Another option at Brevo is not this record's value.
			changed := []destination.Record{rec(0, map[string]any{"GENDER": "Men"})}
			if landed, err := b.dest.Verify(ctx, changed, time.Time{}); err != nil || len(landed) != 0 {
				t.Errorf("verify of another option: %v, %d landed, want none", err, len(landed))
			}
		})
	}
}

// TestCategoryAttributeWithoutOptionsIsSentAsMapped: a category attribute
// listed without its options is written as mapped, as before options were
// read: refusing every value would stop the sync on a listing that left
// them out.
func TestCategoryAttributeWithoutOptionsIsSentAsMapped(t *testing.T) {
	t.Parallel()
	attrs := append(fakebrevo.WithAttributes(), fakebrevo.CategoryAttribute("TIER"))
	b := setup(t, fakebrevo.Options{Attributes: attrs}, func(p *brevo.Params) {
		p.Mode = brevo.ModeSingle
		p.Attributes = []string{"TIER"}
	})
	res, err := b.dest.Write(context.Background(), []destination.Record{rec(0, map[string]any{"TIER": "Gold"})})
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered {
		t.Fatalf("write: %v %+v, want delivered", err, res)
	}
}

// TestClearedMultipleChoiceAttribute: a source that empties a
// multiple-choice attribute ("" from a CSV cell) erases its options in Brevo
// on both paths. Brevo ignores a value not of the attribute's type ("Values
// that don't match the attribute type ... will be ignored", createContact),
// and "" is text, not a list of options: sent as it was, a single write left
// the old options in place, delivered, and a read-back never found the
// record landed. Like a date's, it is sent as null; an import erases it
// either way (emptyContactsAttributes).
func TestClearedMultipleChoiceAttribute(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			attrs := append(fakebrevo.WithAttributes(), fakebrevo.Attribute{Name: "COUNTRIES", Category: "normal", Type: "multiple-choice"})
			b := setup(t, fakebrevo.Options{Attributes: attrs}, func(p *brevo.Params) {
				p.Mode = mode
				p.Attributes = []string{"COUNTRIES", "FIRSTNAME"}
			})
			ctx := context.Background()
			write := func(r destination.Record) destination.Result {
				t.Helper()
				res, err := b.dest.Write(ctx, []destination.Record{r})
				if err != nil {
					t.Fatal(err)
				}
				return b.settle(t, []destination.Record{r}, res)[0]
			}
			full := rec(0, map[string]any{"COUNTRIES": []any{"India", "China"}, "FIRSTNAME": "Ann"})
			if res := write(full); res.Outcome != destination.Delivered {
				t.Fatalf("full: %+v", res)
			}
			cleared := rec(0, map[string]any{"COUNTRIES": "", "FIRSTNAME": "Ann"})
			cleared.Key = "cleared"
			if res := write(cleared); res.Outcome != destination.Delivered {
				t.Fatalf("cleared: %+v", res)
			}
			c, _ := b.fake.Contact(emailOf(cleared))
			if v, ok := c.Attributes["COUNTRIES"]; ok {
				t.Errorf("COUNTRIES = %#v after the source emptied it, want erased", v)
			}
			if st := b.fake.Stats(); st.ValuesDropped != 0 {
				t.Errorf("the fake dropped %d values", st.ValuesDropped)
			}
			if landed, err := b.dest.Verify(ctx, []destination.Record{cleared}, time.Time{}); err != nil || len(landed) != 1 {
				t.Errorf("verify the cleared record: %v, %d of 1 landed", err, len(landed))
			}
		})
	}
}

// TestVerifyReadsBooleansAsTheWriteDoes: a boolean attribute's text is
// sent as true or false whatever its case ("tRuE", typeValues); the
// read-back compared it with strconv.ParseBool, which knows only three
// spellings of each, so the landed write was taken as missing and written
// again.
func TestVerifyReadsBooleansAsTheWriteDoes(t *testing.T) {
	t.Parallel()
	b := setupTyped(t, brevo.ModeSingle)
	ctx := context.Background()
	rs := []destination.Record{rec(0, map[string]any{"VIP": "tRuE"}), rec(1, map[string]any{"VIP": "FaLsE"})}
	res, err := b.dest.Write(ctx, rs)
	if err != nil || res[0].Outcome != destination.Delivered || res[1].Outcome != destination.Delivered {
		t.Fatalf("write: %v %+v", err, res)
	}
	if landed, err := b.dest.Verify(ctx, rs, time.Time{}); err != nil || len(landed) != 2 {
		t.Errorf("verify: %v, %d of 2 landed", err, len(landed))
	}
	rs[1].Data["attributes"] = map[string]any{"VIP": "TRUE"}
	if landed, err := b.dest.Verify(ctx, rs[1:], time.Time{}); err != nil || len(landed) != 0 {
		t.Errorf("verify true against false: %v, %d of 1 landed", err, len(landed))
	}
}
