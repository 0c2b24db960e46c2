// Package sourcetest is the acceptance suite every source connector passes.
//
// A connector's tests call Run with a Harness that builds a Source over
// generated records:
//
//	func TestSuite(t *testing.T) {
//		sourcetest.Run(t, sourcetest.Harness{New: func(t *testing.T, recs []map[string]string) source.Source {
//			... write recs somewhere, return a Source reading them ...
//		}})
//	}
//
// A Source that implements source.Refetcher also runs the Refetcher case:
// rows read page by page are re-read by identity (Harness.Identity), as a run
// retries rejected records (docs/guide.md#the-ledger-and-its-retention); other Sources skip it.
package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
)

// Harness adapts a connector to the suite.
type Harness struct {
	// New returns a Source over recs, in this order. The suite calls it several
	// times with the same recs and expects every call to behave like a fresh
	// process over the same data: same ID, and cursors of one instance valid in
	// another. Every record has the same keys (see Columns); values are compared
	// as strings (fmt.Sprint of whatever the source returns). The suite closes
	// the Sources it gets.
	New func(t *testing.T, recs []map[string]string) source.Source
	// Identity is the column the Refetcher case re-reads rows by: "id" (the
	// default) or "email", both unique in Records. The case runs only for
	// sources that implement source.Refetcher.
	Identity string
}

// Records returns n generated records with columns id, email, name and note.
// The values exercise quoting: commas, quotes, newlines, empty strings,
// surrounding spaces and non-ASCII text (no NUL and no "\r").
func Records(n int) []map[string]string {
	names := []string{"Ada Lovelace", "O'Brien, Pat", `Jo "JJ" Smith`, "  spaced  ", "Zoë Ünal", "", "李雷", "tab\there"}
	notes := []string{"", "plain", "line one\nline two", "a,b,c", `"quoted"`, "ends with comma,", "\n", "emoji 🚀"}
	recs := make([]map[string]string, n)
	for i := range recs {
		recs[i] = map[string]string{
			"id":    fmt.Sprint(i + 1),
			"email": fmt.Sprintf("user%d@example.test", i+1),
			"name":  names[i%len(names)],
			"note":  notes[(i/3)%len(notes)],
		}
	}
	return recs
}

// Columns returns the sorted union of the keys of recs, e.g. for a CSV header.
func Columns(recs []map[string]string) []string {
	seen := map[string]bool{}
	var cols []string
	for _, r := range recs {
		for k := range r {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	sort.Strings(cols)
	return cols
}

// Run runs the acceptance suite against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("sourcetest: Harness.New is nil")
	}
	t.Run("ReadsEveryRecordOnceInOrder", func(t *testing.T) { testReadAll(t, h) })
	t.Run("ResumesFromEveryNext", func(t *testing.T) { testResume(t, h) })
	t.Run("SameCursorSamePage", func(t *testing.T) { testStable(t, h) })
	t.Run("EmptySourceEndsAtOnce", func(t *testing.T) { testEmpty(t, h) })
	t.Run("Cancellation", func(t *testing.T) { testCancel(t, h) })
	t.Run("BadCursor", func(t *testing.T) { testBadCursor(t, h) })
	t.Run("StableID", func(t *testing.T) { testID(t, h) })
	t.Run("Refetcher", func(t *testing.T) { testRefetch(t, h) })
	t.Run("Snapshotter", func(t *testing.T) { testSnapshot(t, h) })
}

// testSnapshot: a Snapshotter's snapshot is the same for the same data
// (another instance, another call) and different once a row is added, so a
// partitioned run's pin tells a changed source. Sources without one skip.
func testSnapshot(t *testing.T, h Harness) {
	recs := Records(20)
	src := newSource(t, h, recs)
	sn, ok := src.(source.Snapshotter)
	if !ok {
		t.Skip("the source is not a source.Snapshotter")
	}
	ctx := context.Background()
	first, err := sn.Snapshot(ctx)
	if err != nil || len(first) == 0 {
		t.Fatalf("Snapshot = %v, %v", first, err)
	}
	again, err := sn.Snapshot(ctx)
	if err != nil || !reflect.DeepEqual(first, again) {
		t.Fatalf("a second Snapshot of the same data = %v, %v; want %v", again, err, first)
	}
	other, err := newSource(t, h, recs).(source.Snapshotter).Snapshot(ctx)
	if err != nil || !reflect.DeepEqual(first, other) {
		t.Fatalf("another instance over the same data: Snapshot = %v, %v; want %v", other, err, first)
	}
	more := append(slices.Clone(recs), map[string]string{"id": "21", "email": "user21@example.test", "name": "New", "note": ""})
	changed, err := newSource(t, h, more).(source.Snapshotter).Snapshot(ctx)
	if err != nil || reflect.DeepEqual(first, changed) {
		t.Fatalf("with a row added: Snapshot = %v, %v; want it to differ from %v", changed, err, first)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sn.Snapshot(cctx); err == nil {
		t.Fatal("Snapshot on a cancelled context succeeded")
	}
}

func newSource(t *testing.T, h Harness, recs []map[string]string) source.Source {
	t.Helper()
	src := h.New(t, recs)
	if src == nil {
		t.Fatal("Harness.New returned nil")
	}
	t.Cleanup(func() {
		if err := src.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return src
}

// saved is a Next cursor and how many records came before it.
type saved struct {
	cursor string
	before int
}

// readToEnd reads from cursor until End, checking every page, and returns the
// records and the Next of every page but the last. want bounds the loop.
func readToEnd(t *testing.T, src source.Source, cursor string, size, want int) ([]source.Record, []saved) {
	t.Helper()
	var (
		recs  []source.Record
		nexts []saved
	)
	for pages := 0; ; pages++ {
		if pages > want/size+2 {
			t.Fatalf("size %d: no End after %d pages and %d records (want %d records)", size, pages, len(recs), want)
		}
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatalf("size %d: ReadPage after %d records: %v", size, len(recs), err)
		}
		if page.Cursor != cursor {
			t.Fatalf("size %d: Page.Cursor = %q, want the cursor it was read at %q", size, page.Cursor, cursor)
		}
		if len(page.Records) > size {
			t.Fatalf("size %d: page has %d records", size, len(page.Records))
		}
		recs = append(recs, page.Records...)
		if page.End {
			return recs, nexts
		}
		if len(page.Records) == 0 {
			t.Fatalf("size %d: empty page without End after %d records", size, len(recs))
		}
		if page.Next == "" {
			t.Fatalf("size %d: page without End has no Next", size)
		}
		nexts = append(nexts, saved{cursor: page.Next, before: len(recs)})
		cursor = page.Next
	}
}

func asString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// checkRecords reports where got differs from want.
func checkRecords(t *testing.T, what string, got []source.Record, want []map[string]string) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if err := diffRecord(got[i], want[i]); err != nil {
			t.Fatalf("%s: record %d of %d: %v", what, i, len(want), err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: got %d records, want %d", what, len(got), len(want))
	}
}

func diffRecord(got source.Record, want map[string]string) error {
	for k, w := range want {
		v, ok := got.Fields[k]
		if !ok {
			return fmt.Errorf("field %q missing", k)
		}
		if s := asString(v); s != w {
			return fmt.Errorf("field %q = %q, want %q", k, s, w)
		}
	}
	if len(got.Fields) != len(want) {
		return fmt.Errorf("%d fields, want %d", len(got.Fields), len(want))
	}
	return nil
}

func samePage(a, b source.Page) error {
	if a.Cursor != b.Cursor || a.Next != b.Next || a.End != b.End || len(a.Records) != len(b.Records) {
		return fmt.Errorf("pages differ: cursor %q/%q next %q/%q end %v/%v records %d/%d",
			a.Cursor, b.Cursor, a.Next, b.Next, a.End, b.End, len(a.Records), len(b.Records))
	}
	for i := range a.Records {
		want := make(map[string]string, len(b.Records[i].Fields))
		for k, v := range b.Records[i].Fields {
			want[k] = asString(v)
		}
		if err := diffRecord(a.Records[i], want); err != nil {
			return fmt.Errorf("record %d: %v", i, err)
		}
	}
	return nil
}

func testReadAll(t *testing.T, h Harness) {
	for _, n := range []int{1, 2, 5, 24} {
		recs := Records(n)
		for _, size := range []int{1, 2, 3, 5, 7, n, n + 1, 1000} {
			t.Run(fmt.Sprintf("records=%d/size=%d", n, size), func(t *testing.T) {
				src := newSource(t, h, recs)
				got, _ := readToEnd(t, src, "", size, n)
				checkRecords(t, "one pass", got, recs)
				// The same instance reads the whole source again from the start.
				got, _ = readToEnd(t, src, "", size, n)
				checkRecords(t, "second pass", got, recs)
			})
		}
	}
}

func testResume(t *testing.T, h Harness) {
	const n = 23
	recs := Records(n)
	for _, size := range []int{1, 4, 10} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			first := newSource(t, h, recs)
			_, nexts := readToEnd(t, first, "", size, n)
			if want := (n - 1) / size; len(nexts) < want {
				t.Fatalf("got %d cursors, want at least %d", len(nexts), want)
			}
			for _, sv := range nexts {
				// A fresh instance (a new process), with another page size.
				fresh := newSource(t, h, recs)
				got, _ := readToEnd(t, fresh, sv.cursor, 3, n-sv.before)
				checkRecords(t, fmt.Sprintf("fresh source resumed after %d records", sv.before), got, recs[sv.before:])
			}
			// The first instance, jumping back to every cursor in reverse order.
			for _, sv := range slices.Backward(nexts) {
				got, _ := readToEnd(t, first, sv.cursor, size, n-sv.before)
				checkRecords(t, fmt.Sprintf("same source back at record %d", sv.before), got, recs[sv.before:])
			}
		})
	}
}

func testStable(t *testing.T, h Harness) {
	const n, size = 17, 4
	recs := Records(n)
	src := newSource(t, h, recs)
	var pages []source.Page
	cursor := ""
	for range n + 2 {
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatalf("ReadPage: %v", err)
		}
		pages = append(pages, page)
		if page.End {
			break
		}
		cursor = page.Next
	}
	if !pages[len(pages)-1].End {
		t.Fatal("no End")
	}
	check := func(what string, src source.Source) {
		t.Helper()
		for _, want := range slices.Backward(pages) {
			for range 2 {
				got, err := src.ReadPage(context.Background(), want.Cursor, size)
				if err != nil {
					t.Fatalf("%s: ReadPage(%q): %v", what, want.Cursor, err)
				}
				if err := samePage(got, want); err != nil {
					t.Fatalf("%s: ReadPage(%q) again: %v", what, want.Cursor, err)
				}
			}
		}
	}
	check("same source", src)
	check("fresh source", newSource(t, h, recs))
}

func testEmpty(t *testing.T, h Harness) {
	for _, size := range []int{1, 100} {
		src := newSource(t, h, nil)
		page, err := src.ReadPage(context.Background(), "", size)
		if err != nil {
			t.Fatalf("size %d: ReadPage: %v", size, err)
		}
		if !page.End || len(page.Records) != 0 {
			t.Fatalf("size %d: got End=%v with %d records, want End at once with none", size, page.End, len(page.Records))
		}
	}
}

func testCancel(t *testing.T, h Harness) {
	const n = 12
	recs := Records(n)
	src := newSource(t, h, recs)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	if page, err := src.ReadPage(cancelled, "", 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadPage with a cancelled context: %d records, error %v; want context.Canceled", len(page.Records), err)
	}
	first, err := src.ReadPage(context.Background(), "", 5)
	if err != nil {
		t.Fatalf("ReadPage after a cancelled call: %v", err)
	}
	checkRecords(t, "first page after a cancelled call", first.Records, recs[:5])
	if first.End {
		t.Fatal("first page of 5 of 12 records has End")
	}
	if _, err := src.ReadPage(cancelled, first.Next, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadPage(Next) with a cancelled context: %v; want context.Canceled", err)
	}
	got, _ := readToEnd(t, src, first.Next, 5, n-5)
	checkRecords(t, "rest after a cancelled call", got, recs[5:])
}

func testBadCursor(t *testing.T, h Harness) {
	src := newSource(t, h, Records(3))
	for _, c := range []string{"\x00\xff not a cursor \xfe", "%%%"} {
		if _, err := src.ReadPage(context.Background(), c, 2); !errors.Is(err, source.ErrBadCursor) {
			t.Errorf("ReadPage(%q): %v; want source.ErrBadCursor", c, err)
		}
	}
	// The Source still works after a bad cursor.
	got, _ := readToEnd(t, src, "", 2, 3)
	checkRecords(t, "after a bad cursor", got, Records(3))
}

func testID(t *testing.T, h Harness) {
	recs := Records(2)
	a, b := newSource(t, h, recs), newSource(t, h, recs)
	if a.ID() == "" {
		t.Fatal("ID is empty")
	}
	if a.ID() != b.ID() {
		t.Fatalf("two sources over the same data: IDs %q and %q", a.ID(), b.ID())
	}
}

// refetcher returns src as a source.Refetcher, skipping the test when it is
// not one.
func refetcher(t *testing.T, src source.Source) source.Refetcher {
	t.Helper()
	r, ok := src.(source.Refetcher)
	if !ok {
		t.Skipf("%T does not implement source.Refetcher", src)
	}
	return r
}

// byIdentity indexes recs by their identity column as mapping.Identity renders
// it (fmt.Sprint), failing on a missing or repeated identity.
func byIdentity(t *testing.T, what, identity string, recs []source.Record) map[string]source.Record {
	t.Helper()
	out := make(map[string]source.Record, len(recs))
	for i, r := range recs {
		v, ok := r.Fields[identity]
		if !ok || v == nil {
			t.Fatalf("%s: record %d has no %q", what, i, identity)
		}
		id := fmt.Sprint(v)
		if _, dup := out[id]; dup {
			t.Fatalf("%s: identity %q comes twice", what, id)
		}
		out[id] = r
	}
	return out
}

// checkRefetched fails unless got holds exactly the records of want whose
// identity is in ids, each once, with the Fields ReadPage returned: same
// values of the same types, so the runner builds the same delivery keys.
func checkRefetched(t *testing.T, what, identity string, got []source.Record, want map[string]source.Record, ids []string) {
	t.Helper()
	gotBy := byIdentity(t, what, identity, got)
	expect := 0
	for _, id := range ids {
		if _, ok := want[id]; ok {
			expect++
		}
	}
	for id, g := range gotBy {
		w, ok := want[id]
		if !ok || !slices.Contains(ids, id) {
			t.Fatalf("%s: returned identity %q, which is not one asked for of a row in the source", what, id)
		}
		if !reflect.DeepEqual(g.Fields, w.Fields) {
			t.Fatalf("%s: identity %q: Fields %#v, want %#v as ReadPage returned them", what, id, g.Fields, w.Fields)
		}
	}
	if len(got) != expect {
		t.Fatalf("%s: %d records, want %d", what, len(got), expect)
	}
}

// testRefetch re-reads rows by identity after reading them page by page, as a
// run retrying rejected records does (docs/guide.md#the-ledger-and-its-retention).
func testRefetch(t *testing.T, h Harness) {
	identity := h.Identity
	if identity == "" {
		identity = "id"
	}
	const n, size = 30, 7
	recs := Records(n)
	src := newSource(t, h, recs)
	r := refetcher(t, src)
	ctx := context.Background()
	read, _ := readToEnd(t, src, "", size, n)
	checkRecords(t, "pages", read, recs)
	rows := byIdentity(t, "pages", identity, read)
	idOf := func(i int) string { return fmt.Sprint(read[i].Fields[identity]) }

	// First and last rows, and rows on both sides of page boundaries.
	picked := []string{idOf(0), idOf(size - 1), idOf(size), idOf(2*size + 3), idOf(n - 1)}
	var wrong []string
	for _, id := range picked[:2] {
		// Other spellings of an existing id are not its rendering.
		wrong = append(wrong, " "+id, id+" ", "0"+id, "+"+id, strings.ToUpper(id)+"X")
	}
	wrong = append(wrong, "", "not a number", "1.5", "-0", "99999999999999999999", "NULL", "{}", "\x00", "\xff\xfe",
		"a\x00b", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "2024-05-01T10:00:00Z", `"quoted", {1,2}`)
	unknown := []string{fmt.Sprint(n + 1), "0", "-1", "user999@example.test"}

	t.Run("PickedRows", func(t *testing.T) {
		ids := append(slices.Clone(picked), picked[0]) // a repeated id
		got, err := r.ReadIdentities(ctx, identity, ids)
		if err != nil {
			t.Fatalf("ReadIdentities: %v", err)
		}
		checkRefetched(t, "picked rows", identity, got, rows, picked)
	})
	t.Run("EveryRowInAFreshSource", func(t *testing.T) {
		all := make([]string, n)
		for i := range all {
			all[i] = idOf(i)
		}
		slices.Reverse(all)
		got, err := refetcher(t, newSource(t, h, recs)).ReadIdentities(ctx, identity, all)
		if err != nil {
			t.Fatalf("ReadIdentities: %v", err)
		}
		checkRefetched(t, "every row", identity, got, rows, all)
	})
	t.Run("UnknownAndWrongTypeMatchNothing", func(t *testing.T) {
		for _, id := range append(slices.Clone(unknown), wrong...) {
			got, err := r.ReadIdentities(ctx, identity, []string{id})
			if err != nil {
				t.Fatalf("ReadIdentities(%q): %v", id, err)
			}
			if len(got) != 0 {
				t.Fatalf("ReadIdentities(%q): %d records, want none", id, len(got))
			}
		}
		// Mixed with ids of rows, they leave those rows alone.
		ids := append(append(slices.Clone(wrong), picked...), unknown...)
		got, err := r.ReadIdentities(ctx, identity, ids)
		if err != nil {
			t.Fatalf("ReadIdentities: %v", err)
		}
		checkRefetched(t, "picked rows among unknown ids", identity, got, rows, picked)
	})
	t.Run("LongList", func(t *testing.T) {
		// Thousands of ids, the rows' spread through unknown and wrong ones:
		// a source that reads them in chunks finds rows in every chunk.
		var ids []string
		for i := range 3000 {
			switch {
			case i%450 == 0:
				ids = append(ids, picked[(i/450)%len(picked)])
			case i%7 == 0:
				ids = append(ids, wrong[i%len(wrong)])
			default:
				ids = append(ids, fmt.Sprint(n+1+i))
			}
		}
		got, err := r.ReadIdentities(ctx, identity, ids)
		if err != nil {
			t.Fatalf("ReadIdentities: %v", err)
		}
		checkRefetched(t, "3000 ids", identity, got, rows, picked)
	})
	t.Run("DeletedRowsLeftOut", func(t *testing.T) {
		// The source after rows 3 and n-1 were deleted, read by a new process.
		remaining := slices.Concat(recs[:3], recs[4:n-1])
		after := refetcher(t, newSource(t, h, remaining))
		ids := []string{idOf(3), idOf(n - 1), idOf(2), idOf(4)}
		got, err := after.ReadIdentities(ctx, identity, ids)
		if err != nil {
			t.Fatalf("ReadIdentities: %v", err)
		}
		left := maps.Clone(rows)
		delete(left, idOf(3))
		delete(left, idOf(n-1))
		checkRefetched(t, "after deletions", identity, got, left, ids)
	})
	t.Run("NoIDs", func(t *testing.T) {
		for _, ids := range [][]string{nil, {}} {
			got, err := r.ReadIdentities(ctx, identity, ids)
			if err != nil || len(got) != 0 {
				t.Fatalf("ReadIdentities(%#v): %d records, %v; want none and no error", ids, len(got), err)
			}
		}
	})
	t.Run("Errors", func(t *testing.T) {
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.ReadIdentities(cancelled, identity, picked); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled context: %v; want context.Canceled", err)
		}
		if _, err := r.ReadIdentities(ctx, "no_such_column", picked); !errors.Is(err, source.ErrInvalid) {
			t.Fatalf("unknown identity column: %v; want source.ErrInvalid", err)
		}
		// Pages read as before.
		again, _ := readToEnd(t, src, "", size, n)
		checkRecords(t, "pages after ReadIdentities", again, recs)
	})
}

// WantNoAnswer checks that err, what a source's setup returned when it ran
// out of time, is a *source.NoAnswerError (source unavailable, not invalid
// data) whose text says each of wants.
func WantNoAnswer(t testing.TB, what string, err error, wants ...string) {
	t.Helper()
	var na *source.NoAnswerError
	if !errors.As(err, &na) || !errors.Is(err, source.ErrUnavailable) || errors.Is(err, source.ErrInvalid) {
		t.Fatalf("%s = %v, want a *source.NoAnswerError (source unavailable)", what, err)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q, want it to say %q", what, err, want)
		}
	}
}
