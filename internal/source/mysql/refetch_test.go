package mysql_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/oncesync/oncesync/internal/source/mysql"
)

// TestReadIdentitiesTypes re-reads rows by identities of several types, as
// mapping.Identity renders them from ReadPage's records: every rendering read
// from a page finds its row, and nothing else matches (non-canonical forms,
// other cases in a case-insensitive collation, deleted rows, wrong types).
func TestReadIdentitiesTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seq(t, 30)
	tests := []struct {
		name, idType, id string
		// others are ids that must match nothing.
		others []string
	}{
		{"bigint", "BIGINT", "g * 1000", []string{"01000", " 1000", "1000.0", "x", "", "99999999999999999999"}},
		{"unsigned", "BIGINT UNSIGNED", "18446744073709551615 - g", []string{"-1", "18446744073709551616"}},
		{"varchar ci", "VARCHAR(40) COLLATE utf8mb4_general_ci", "CONCAT('User', g, '@Example.test')", []string{"user1@example.test", "USER1@EXAMPLE.TEST", "User1@Example.test "}},
		{"datetime", "DATETIME(6)", "TIMESTAMP('2024-05-01 10:00:00') + INTERVAL g * 1500000 MICROSECOND", []string{"2024-05-01 10:00:01.500000", "2024-05-01T10:00:01.500000", "not a date"}},
		{"timestamp", "TIMESTAMP(6)", "TIMESTAMP('2024-05-01 10:00:00') + INTERVAL g SECOND", []string{"2024-05-01 10:00:01", "2024-05-01T10:00:01"}},
		{"decimal", "DECIMAL(10,2)", "g / 4", []string{"0.25", ".25", "0.250", "1e2"}},
		{"varbinary", "VARBINARY(16)", "UNHEX(MD5(g))", []string{"not base64!", "AAAA"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := fmt.Sprintf("ids%d", i)
			b.exec(t,
				fmt.Sprintf("CREATE TABLE %s (pk INT PRIMARY KEY, id %s NOT NULL UNIQUE, v INT)", table, tt.idType),
				fmt.Sprintf("INSERT INTO %s SELECT g, %s, g FROM seq", table, tt.id),
			)
			src := b.newSource(t, mysql.Params{Table: table, CursorColumn: "pk", Identity: "id"})
			recs, _ := readAll(t, src, "", 100)
			ids := column(recs, "id")
			// Every third row, plus the others and a deleted row.
			var ask, want []string
			for j := 0; j < len(ids); j += 3 {
				ask = append(ask, ids[j])
				want = append(want, column(recs[j:j+1], "v")[0])
			}
			b.exec(t, fmt.Sprintf("DELETE FROM %s WHERE v = 30", table))
			ask = append(ask, ids[29])
			ask = append(ask, tt.others...)
			got, err := src.ReadIdentities(context.Background(), "id", ask)
			if err != nil {
				t.Fatal(err)
			}
			vs := column(got, "v")
			sort.Slice(vs, func(i, j int) bool { return len(vs[i]) < len(vs[j]) || len(vs[i]) == len(vs[j]) && vs[i] < vs[j] })
			if !slices.Equal(vs, want) {
				t.Fatalf("rows %v, want %v (ids %v)", vs, want, ask)
			}
			// The records are ReadPage's.
			for _, r := range got {
				for _, p := range recs {
					if fmt.Sprint(p.Fields["id"]) == fmt.Sprint(r.Fields["id"]) && fmt.Sprint(p.Fields) != fmt.Sprint(r.Fields) {
						t.Fatalf("refetched %v, read %v", r.Fields, p.Fields)
					}
				}
			}
		})
	}
}

// TestReadIdentitiesLongList reads 2,500 ids (three statements) in one call.
func TestReadIdentitiesLongList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, "CREATE TABLE many (id INT PRIMARY KEY, v INT)")
	for start := 1; start <= 3000; start += 500 {
		q := "INSERT INTO many VALUES "
		for g := start; g < start+500; g++ {
			if g > start {
				q += ", "
			}
			q += fmt.Sprintf("(%d, %d)", g, g*2)
		}
		b.exec(t, q)
	}
	src := b.newSource(t, mysql.Params{Table: "many", Identity: "id"})
	var ask []string
	for g := 1; g <= 2500; g++ {
		ask = append(ask, fmt.Sprint(g*2)) // even ids 2..5000: 2..3000 exist
	}
	got, err := src.ReadIdentities(context.Background(), "id", ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1500 {
		t.Fatalf("%d rows, want 1500", len(got))
	}
	for _, r := range got {
		id, v := r.Fields["id"].(int64), r.Fields["v"].(int64)
		if id%2 != 0 || v != 2*id {
			t.Fatalf("row %v", r.Fields)
		}
	}
}
