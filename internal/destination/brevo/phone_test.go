package brevo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// TestSMSNumbers: Brevo keeps an SMS number as digits ("+33 6 12 34 56 78"
// becomes 33612345678) and gives it to one contact. A record whose number
// another contact holds is rejected with the reason on both paths (on the
// bulk path, matched in the import's report by Brevo's form of the
// number, not counted delivered), and Verify finds a formatted number
// landed, so a record in doubt is not written twice.
func TestSMSNumbers(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) {
				p.Mode = mode
				p.Attributes = []string{"SMS"}
				// One request at a time: the record written first gets the
				// number, and with two in flight either may be first.
				p.Concurrency = 1
			})
			ctx := context.Background()
			rs := []destination.Record{
				rec(0, map[string]any{"SMS": "+33 6 12 34 56 78"}),
				rec(1, map[string]any{"SMS": "0033 612 345 678"}), // the same number, another person
			}
			written, err := b.dest.Write(ctx, rs)
			if err != nil {
				t.Fatal(err)
			}
			res := b.settle(t, rs, written)
			if res[0].Outcome != destination.Delivered {
				t.Fatalf("record 0: %+v, want delivered", res[0])
			}
			if res[1].Outcome != destination.Rejected || !strings.Contains(res[1].Message, "SMS") {
				t.Fatalf("record 1: %+v, want rejected naming the SMS number", res[1])
			}
			if _, ok := b.fake.Contact(emailOf(rs[1])); ok && mode == brevo.ModeBulk {
				t.Error("the import wrote the contact with another's number")
			}
			if c, _ := b.fake.Contact(emailOf(rs[0])); c.Attributes["SMS"] != "33612345678" {
				t.Fatalf("stored %#v", c.Attributes["SMS"])
			}
			b.clock.Advance(time.Minute)
			landed, err := b.dest.Verify(ctx, rs[:1], time.Time{})
			if err != nil || len(landed) != 1 {
				t.Errorf("verify: %v, %d of 1 landed; want the formatted number found in Brevo's form", err, len(landed))
			}
			other := rec(0, map[string]any{"SMS": "+33 6 99 99 99 99"})
			other.Key = "other"
			if landed, err := b.dest.Verify(ctx, []destination.Record{other}, time.Time{}); err != nil || len(landed) != 0 {
				t.Errorf("verify another number: %v, %d of 1 landed", err, len(landed))
			}
		})
	}
}

// TestImportReportNamesTheSkippedRow: two records of one import share an
// ext_id; Brevo applies the first and skips the second (duplicate_ext_id,
// reported with the skipped row's e-mail and the shared ext_id). Only the
// second is rejected: the report row names it by its e-mail first.
func TestImportReportNamesTheSkippedRow(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	ctx := context.Background()
	rs := []destination.Record{rec(0, nil), rec(1, nil)}
	for i := range rs {
		rs[i].Data["ext_id"] = "crm-1"
	}
	written, err := b.dest.Write(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	res := b.settle(t, rs, written)
	if res[0].Outcome != destination.Delivered || res[1].Outcome != destination.Rejected {
		t.Fatalf("results %+v; want the first delivered and the second rejected", res)
	}
}

// TestNumericSMSOnlyRecordSkippedIsRejected: an SMS-only record (no
// e-mail) whose number comes from a numeric column, and which the import
// skips because another contact holds that number, is rejected: the
// report names the row by its SMS number, which must find the record
// whatever the type of its value.
func TestNumericSMSOnlyRecordSkippedIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) {
		p.Mode = brevo.ModeBulk
		p.Attributes = []string{"SMS"}
	})
	ctx := context.Background()
	rs := []destination.Record{rec(0, map[string]any{"SMS": "+33 6 12 34 56 78"}), rec(1, map[string]any{"SMS": int64(33612345678)})}
	delete(rs[1].Data, "email")
	written, err := b.dest.Write(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	res := b.settle(t, rs, written)
	if res[0].Outcome != destination.Delivered || res[1].Outcome != destination.Rejected {
		t.Fatalf("results %+v; want the first delivered and the numeric SMS-only one rejected", res)
	}
}
