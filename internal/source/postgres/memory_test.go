package postgres_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/source/postgres"
)

// loadContacts creates table name with n rows (id, email, name, plan,
// updated_at) loaded with COPY.
func (b *bundle) loadContacts(tb testing.TB, name string, n int) {
	tb.Helper()
	b.exec(tb, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, email text NOT NULL, name text, plan text, updated_at timestamptz NOT NULL)`, b.table(name)))
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	i := 0
	b.mu.Lock()
	copied, err := b.admin.CopyFrom(context.Background(), pgx.Identifier{b.schema, name},
		[]string{"id", "email", "name", "plan", "updated_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == n {
				return nil, nil
			}
			i++
			return []any{int64(i), fmt.Sprintf("user%d@example.test", i), fmt.Sprintf("Name %d, Jr.", i), "pro",
				base.Add(time.Duration(i/7) * time.Millisecond)}, nil
		}))
	b.mu.Unlock()
	if err != nil || int(copied) != n {
		tb.Fatalf("copy %d rows: %d, %v", n, copied, err)
	}
	b.exec(tb, fmt.Sprintf(`CREATE INDEX ON %s (updated_at, id)`, b.table(name)), "ANALYZE "+b.table(name))
}

// pagedMemory pages through src and returns the rows read, the bytes
// allocated per page and the largest live heap seen (after a GC, every 20
// pages).
func pagedMemory(t *testing.T, src *postgres.Source, size int) (rows int, perPage float64, maxLive uint64) {
	t.Helper()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	start, base := ms.TotalAlloc, ms.HeapAlloc
	pages, cursor := 0, ""
	for {
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		rows += len(page.Records)
		if pages%20 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			maxLive = max(maxLive, ms.HeapAlloc-min(base, ms.HeapAlloc))
		}
		if page.End {
			break
		}
		cursor = page.Next
	}
	runtime.ReadMemStats(&ms)
	return rows, float64(ms.TotalAlloc-start) / float64(pages), maxLive
}

// TestMemoryFlat pages a 10,000-row and a 100,000-row table by (updated_at,
// id): the bytes allocated per page and the live heap must not grow with the
// table.
func TestMemoryFlat(t *testing.T) {
	// Not parallel: it measures the process's heap.
	b := setup(t)
	const small, large, size = 10_000, 100_000, 500
	b.loadContacts(t, "small", small)
	b.loadContacts(t, "large", large)
	params := func(name string) postgres.Params {
		return postgres.Params{Table: b.table(name), CursorColumn: "updated_at", Identity: "id"}
	}
	smallRows, smallPerPage, _ := pagedMemory(t, b.newSource(t, params("small")), size)
	began := time.Now()
	largeRows, largePerPage, largeLive := pagedMemory(t, b.newSource(t, params("large")), size)
	elapsed := time.Since(began)
	t.Logf("per page of %d: %.0f B (%d rows), %.0f B (%d rows); largest live heap %d KB; %d rows in %v (%.0f rows/s)",
		size, smallPerPage, small, largePerPage, large, largeLive>>10, largeRows, elapsed.Round(time.Millisecond),
		float64(largeRows)/elapsed.Seconds())
	if smallRows != small || largeRows != large {
		t.Fatalf("read %d and %d rows, want %d and %d", smallRows, largeRows, small, large)
	}
	if largePerPage > smallPerPage*1.2 {
		t.Errorf("a page of a %d-row table allocates %.0f B, of a %d-row table %.0f B: allocation grows with the table",
			large, largePerPage, small, smallPerPage)
	}
	// A page of 500 records holds well under 1 MB; the table's data is about
	// 10 MB as Go values.
	const bound = 2 << 20
	if largeLive > bound {
		t.Errorf("live heap reached %d KB paging %d rows; want under %d KB", largeLive>>10, large, bound>>10)
	}
}

// BenchmarkReadPage reads 500-row pages of a 100,000-row table, round robin.
func BenchmarkReadPage(b *testing.B) {
	bd := setup(b)
	bd.loadContacts(b, "bench", 100_000)
	src := bd.newSource(b, postgres.Params{Table: bd.table("bench"), CursorColumn: "updated_at", Identity: "id"})
	ctx := context.Background()
	cursor := ""
	b.ReportAllocs()
	for b.Loop() {
		page, err := src.ReadPage(ctx, cursor, 500)
		if err != nil {
			b.Fatal(err)
		}
		cursor = page.Next
		if page.End {
			cursor = ""
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/500, "ns/row")
}
