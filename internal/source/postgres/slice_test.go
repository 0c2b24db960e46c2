package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
)

// readSlice reads slice from cursor to the end with page size size; every
// page but the last must be full.
func readSlice(t *testing.T, src *postgres.Source, sl source.Slice, cursor string, size int) []source.Record {
	t.Helper()
	var recs []source.Record
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatal("no End")
		}
		page, err := src.ReadSlice(context.Background(), sl, cursor, size)
		if err != nil {
			t.Fatalf("ReadSlice %d/%d after %d records: %v", sl.K, sl.N, len(recs), err)
		}
		if !page.End && len(page.Records) != size {
			t.Fatalf("slice %d/%d: a page that is not the last holds %d records, want %d", sl.K, sl.N, len(page.Records), size)
		}
		recs = append(recs, page.Records...)
		if page.End {
			return recs
		}
		cursor = page.Next
	}
}

// checkSlices reads every partition of n with ReadSlice and checks that each
// read keeps every row partition.Filter gives its partition (exactly those
// when SliceExact, and for every row strict says yes to), so that, filtered,
// each row is delivered once.
func checkSlices(t *testing.T, src *postgres.Source, identity string, all []string, n int, wantExact bool, strict func(id string) bool) {
	t.Helper()
	owner := map[string]int{}
	for _, id := range all {
		owner[id] = partition.Of(id, n)
	}
	delivered := map[string]int{}
	for k := 1; k <= n; k++ {
		sl := source.Slice{Identity: identity, K: k, N: n}
		if got := src.SliceExact(sl); got != wantExact {
			t.Fatalf("SliceExact(%d/%d) = %v, want %v", k, n, got, wantExact)
		}
		recs := readSlice(t, src, sl, "", 25)
		read := map[string]bool{}
		keep := partition.Filter(identity, k, n)
		for _, rec := range recs {
			id, err := mapping.Identity(rec, identity)
			if err != nil {
				t.Fatal(err)
			}
			if read[id] {
				t.Fatalf("partition %d/%d read %q twice", k, n, id)
			}
			read[id] = true
			if (wantExact || strict(id)) && owner[id] != k {
				t.Fatalf("partition %d/%d read %q, which is partition %d's", k, n, id, owner[id])
			}
			if keep(rec) {
				delivered[id]++
			}
		}
		for id, o := range owner {
			if o == k && !read[id] {
				t.Fatalf("partition %d/%d did not read %q, one of its rows", k, n, id)
			}
		}
	}
	if len(delivered) != len(all) {
		t.Fatalf("%d partitions delivered %d rows, want %d", n, len(delivered), len(all))
	}
	for id, c := range delivered {
		if c != 1 {
			t.Fatalf("row %q delivered %d times", id, c)
		}
	}
}

// none and short say which rows a superset read may not hold: none, or
// those whose identity text the predicate hashes (40 bytes at most).
func none(string) bool { return false }

func short(id string) bool { return len(id) <= 40 }

func TestReadSliceIntegers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	vals := []int64{0, 1, 9, 10, 99, 100, 12345, 999_999, 1_000_000, 9_223_372_036_854_775_807, -1, -9, -10, -123456, -9_223_372_036_854_775_808}
	for i := int64(2); i < 700; i++ {
		vals = append(vals, i*7919%1_000_003, -i*104_729)
	}
	seen := map[int64]bool{}
	var rows []string
	for _, v := range vals {
		if !seen[v] {
			seen[v] = true
			ids = append(ids, fmt.Sprint(v))
			rows = append(rows, fmt.Sprintf("(%d, 'r%d')", v, v))
		}
	}
	for _, typ := range []string{"bigint", "integer"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			name := b.table("ints_" + typ)
			b.exec(t, "CREATE TABLE "+name+" (id "+typ+" PRIMARY KEY, note text)")
			var these []string
			var vs []string
			for i, id := range ids {
				if typ == "integer" && (len(id) > 10 || id == "-2147483649" || strings.HasPrefix(id, "92233") || strings.HasPrefix(id, "-92233")) {
					continue
				}
				these = append(these, id)
				vs = append(vs, rows[i])
			}
			b.exec(t, "INSERT INTO "+name+" VALUES "+strings.Join(vs, ", "))
			src := b.newSource(t, postgres.Params{Table: name, Identity: "id"})
			for _, n := range []int{2, 16, 64} {
				checkSlices(t, src, "id", these, n, true, none)
			}
			for _, n := range []int{3, 12} {
				checkSlices(t, src, "id", these, n, false, none)
			}
		})
	}
}

func TestReadSliceText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	name := b.table("texts")
	b.exec(t, "CREATE TABLE "+name+" (n serial, key text NOT NULL UNIQUE, u uuid NOT NULL DEFAULT gen_random_uuid())")
	ids := []string{"", "a", "é", "日本語", "mixed Case", strings.Repeat("x", 40), strings.Repeat("y", 41), strings.Repeat("ü", 30)}
	for i := 0; i < 600; i++ {
		ids = append(ids, fmt.Sprintf("contact-%d@example.com", i*31))
	}
	vs := make([]string, len(ids))
	for i, id := range ids {
		vs[i] = "('" + strings.ReplaceAll(id, "'", "''") + "')"
	}
	b.exec(t, "INSERT INTO "+name+" (key) VALUES "+strings.Join(vs, ", "))
	t.Run("text", func(t *testing.T) {
		// n orders the rows; key, the identity, breaks no ties but is hashed.
		src := b.newSource(t, postgres.Params{Table: name, CursorColumn: "n", Identity: "key"})
		checkSlices(t, src, "key", ids, 16, false, short)
		checkSlices(t, src, "key", ids, 6, false, none)
	})
	t.Run("uuid", func(t *testing.T) {
		uuids := b.queryStrings(t, "SELECT u::text FROM "+name)
		src := b.newSource(t, postgres.Params{Query: "SELECT n, u FROM " + name, CursorColumn: "u", Identity: "u"})
		checkSlices(t, src, "u", uuids, 8, false, short)
	})
	t.Run("timestamp identity reads everything", func(t *testing.T) {
		src := b.newSource(t, postgres.Params{Query: "SELECT n, timestamptz '2024-01-01' + n * interval '1 s' AS at FROM " + name, Identity: "at"})
		var all []string
		for _, rec := range readSlice(t, src, source.Slice{Identity: "at", K: 1, N: 16}, "", 50) {
			all = append(all, fmt.Sprint(rec.Fields["at"]))
		}
		if len(all) != len(ids) {
			t.Fatalf("read %d rows, want all %d", len(all), len(ids))
		}
		checkSlices(t, src, "at", all, 4, false, none)
	})
}

// A cursor of ReadPage resumes ReadSlice and the other way round: a
// partition's cursor saved before the source could read slices still
// resumes where it stopped.
func TestReadSliceResumesReadPageCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	name := b.table("resume")
	b.exec(t, "CREATE TABLE "+name+" (id bigint PRIMARY KEY, note text)",
		"INSERT INTO "+name+" SELECT g, 'n' || g FROM generate_series(1, 500) g")
	src := b.newSource(t, postgres.Params{Table: name, Identity: "id"})
	first, err := src.ReadPage(context.Background(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	const n, k = 4, 3
	rest := readSlice(t, src, source.Slice{Identity: "id", K: k, N: n}, first.Next, 10)
	want := 0
	for i := 101; i <= 500; i++ {
		if partition.Of(fmt.Sprint(i), n) == k {
			want++
		}
	}
	if len(rest) != want {
		t.Fatalf("slice %d/%d after the first page read %d rows, want %d", k, n, len(rest), want)
	}
	for _, rec := range rest {
		if id := rec.Fields["id"].(int64); id <= 100 || partition.Of(fmt.Sprint(id), n) != k {
			t.Fatalf("slice read row %d", id)
		}
	}
}
