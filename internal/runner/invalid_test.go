package runner

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// sliceSource serves recs in pages; its cursor is the index of a page's
// first record.
type sliceSource struct{ recs []source.Record }

func (s *sliceSource) ID() string   { return "slice" }
func (s *sliceSource) Close() error { return nil }
func (s *sliceSource) ReadPage(_ context.Context, cursor string, size int) (source.Page, error) {
	from := 0
	if cursor != "" {
		from, _ = strconv.Atoi(cursor)
	}
	to := min(from+size, len(s.recs))
	p := source.Page{Cursor: cursor, Records: s.recs[from:to], Next: strconv.Itoa(to), End: to == len(s.recs)}
	if p.End {
		p.Next = ""
	}
	return p, nil
}

func row(i int) source.Record {
	return source.Record{Fields: map[string]any{"id": strconv.Itoa(i), "email": fmt.Sprintf("c%05d@example.com", i), "first_name": "N" + strconv.Itoa(i)}}
}

// TestUnreadableRecordsAreRejected: a record the source could not read,
// and one without its identity, are rejected with their reason and
// without a write, while the rest of their page is delivered; a page of
// which nothing can be read fails the run.
func TestUnreadableRecordsAreRejected(t *testing.T) {
	t.Parallel()
	tb := setup(t, 1, destination.CapVerify)
	var recs []source.Record
	for i := 1; i <= 250; i++ {
		recs = append(recs, row(i))
	}
	recs[9] = source.Record{Invalid: "line 11: invalid JSON: unexpected end of input"}
	recs[20].Fields["id"] = nil // no identity
	p := tb.params(t, "id")
	p.Source = &sliceSource{recs: recs}
	r, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Read != 250 || r.Written != 248 || r.Rejected != 2 {
		t.Fatalf("run: read %d written %d rejected %d, want 250/248/2", r.Read, r.Written, r.Rejected)
	}
	if _, recs, _ := tb.dest.stats(); recs != 248 {
		t.Fatalf("the destination got %d records, want 248", recs)
	}
	es, err := tb.store.LedgerList(context.Background(), "s1", store.LedgerRejected, 0)
	if err != nil || len(es) != 2 {
		t.Fatalf("rejected entries: %d (%v)", len(es), err)
	}
	var reasons []string
	for _, e := range es {
		reasons = append(reasons, ledger.RecordOf(e).Reason)
	}
	if !containsSub(reasons, "line 11: invalid JSON") || !containsSub(reasons, "record 21 of the page") {
		t.Fatalf("reasons %q do not name the line and the record", reasons)
	}

	// A page of which nothing can be read: the format is wrong.
	bad := make([]source.Record, 5)
	for i := range bad {
		bad[i] = source.Record{Invalid: fmt.Sprintf("line %d: not JSON", i+1)}
	}
	p2 := tb.params(t, "id")
	p2.Source = &sliceSource{recs: bad}
	p2.ResetCursor = true
	if _, err := Run(context.Background(), p2); failure.CodeOf(err) != failure.SourceQueryInvalid {
		t.Fatalf("a page of unreadable records: %v, want source_query_invalid", err)
	}
}

func containsSub(ss []string, sub string) bool {
	return slices.ContainsFunc(ss, func(s string) bool { return strings.Contains(s, sub) })
}
