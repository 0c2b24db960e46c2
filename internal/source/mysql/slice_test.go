package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/mysql"
)

// checkSlices reads every partition of n with ReadSlice (pages of 25) and
// checks that each keeps every row partition.Filter gives its partition,
// only those when SliceExact (and for every row strict says yes to), each
// page but the last full, and that, filtered, each row is delivered once.
func checkSlices(t *testing.T, src *mysql.Source, identity string, all []string, n int, wantExact bool, strict func(id string) bool) {
	t.Helper()
	delivered := map[string]int{}
	for k := 1; k <= n; k++ {
		sl := source.Slice{Identity: identity, K: k, N: n}
		if got := src.SliceExact(sl); got != wantExact {
			t.Fatalf("SliceExact(%d/%d) = %v, want %v", k, n, got, wantExact)
		}
		keep := partition.Filter(identity, k, n)
		read := map[string]bool{}
		for cursor, pages := "", 0; ; pages++ {
			page, err := src.ReadSlice(context.Background(), sl, cursor, 25)
			if err != nil {
				t.Fatalf("ReadSlice %d/%d: %v", k, n, err)
			}
			if !page.End && len(page.Records) != 25 {
				t.Fatalf("slice %d/%d: a page that is not the last holds %d records", k, n, len(page.Records))
			}
			for _, rec := range page.Records {
				id, err := mapping.Identity(rec, identity)
				if err != nil {
					t.Fatal(err)
				}
				if read[id] {
					t.Fatalf("partition %d/%d read %q twice", k, n, id)
				}
				read[id] = true
				if (wantExact || strict(id)) && partition.Of(id, n) != k {
					t.Fatalf("partition %d/%d read %q, partition %d's", k, n, id, partition.Of(id, n))
				}
				if keep(rec) {
					delivered[id]++
				}
			}
			if page.End {
				break
			}
			cursor = page.Next
		}
		for _, id := range all {
			if partition.Of(id, n) == k && !read[id] {
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

func none(string) bool { return false }

func short(id string) bool { return len(id) <= 40 }

func TestReadSlice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	vals := []string{"0", "1", "9", "10", "99", "100", "12345", "9223372036854775807", "-1", "-10", "-123456", "-9223372036854775808"}
	for i := 2; i < 400; i++ {
		vals = append(vals, fmt.Sprint(i*7919%1_000_003), fmt.Sprint(-i*104_729))
	}
	rows := make([]string, len(vals))
	for i, v := range vals {
		rows[i] = "(" + v + ")"
	}
	b.exec(t, "CREATE TABLE ints (id BIGINT PRIMARY KEY)", "INSERT INTO ints VALUES "+strings.Join(rows, ", "))
	t.Run("bigint", func(t *testing.T) {
		src := b.newSource(t, mysql.Params{Table: "ints", Identity: "id"})
		for _, n := range []int{2, 16, 64} {
			checkSlices(t, src, "id", vals, n, true, none)
		}
		checkSlices(t, src, "id", vals, 12, false, none)
		checkSlices(t, src, "id", vals, 3, false, none)
	})
	t.Run("bigint unsigned", func(t *testing.T) {
		b.exec(t, "CREATE TABLE uints (id BIGINT UNSIGNED PRIMARY KEY)",
			"INSERT INTO uints SELECT id + 9223372036854775808 FROM ints", "INSERT INTO uints VALUES (0), (7), (18446744073709551615) ON DUPLICATE KEY UPDATE id = id")
		ids := b.queryStrings(t, "SELECT CAST(id AS CHAR) FROM uints")
		src := b.newSource(t, mysql.Params{Table: "uints", Identity: "id"})
		checkSlices(t, src, "id", ids, 16, true, none)
	})
	t.Run("varchar", func(t *testing.T) {
		texts := []string{"", "a", "é", "日本語", "O'Brien", strings.Repeat("x", 40), strings.Repeat("y", 41), strings.Repeat("ü", 30)}
		for i := 0; i < 300; i++ {
			texts = append(texts, fmt.Sprintf("contact-%d@example.com", i*31))
		}
		rows := make([]string, len(texts))
		for i, s := range texts {
			rows[i] = fmt.Sprintf("(%d, _utf8mb4 X'%x')", i, s)
		}
		b.exec(t, "CREATE TABLE texts (n INT PRIMARY KEY, k VARCHAR(100) NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
			"INSERT INTO texts VALUES "+strings.Join(rows, ", "))
		src := b.newSource(t, mysql.Params{Table: "texts", CursorColumn: "n", Identity: "k"})
		checkSlices(t, src, "k", texts, 16, false, short)
		checkSlices(t, src, "k", texts, 6, false, none)
	})
}
