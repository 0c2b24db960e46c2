package sqlite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// filterKeys is how many keys f's parts were given.
func filterKeys(f *syncFilter) int {
	n := 0
	for _, p := range f.parts {
		n += p.n
	}
	return n
}

// newSyncFilter is an empty filter with every part at its least size.
func newSyncFilter() *syncFilter {
	f := &syncFilter{}
	for p := range f.parts {
		f.parts[p] = newKeyFilter(0)
	}
	return f
}

// checkFilterRows fails unless every ledger_filter row holds every key of
// its part that ledger, ledger_done and ledger_claims hold (the invariant
// of keyfilter.go), and returns how many rows there are.
func checkFilterRows(t *testing.T, s *Store) int {
	t.Helper()
	rows, err := s.r.Query(`SELECT sid, part, n, bits FROM ledger_filter`)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[filterKey]*keyFilter{}
	for rows.Next() {
		var (
			fk filterKey
			n  int64
			b  []byte
		)
		if err := rows.Scan(&fk.sid, &fk.part, &n, &b); err != nil {
			t.Fatal(err)
		}
		f, err := decodeKeyFilter(n, b)
		if err != nil {
			t.Fatalf("part %+v: %v", fk, err)
		}
		parts[fk] = f
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()
	keys, err := s.r.Query(`SELECT sid, key FROM ledger UNION ALL SELECT sid, key FROM ledger_done UNION ALL SELECT sid, key FROM ledger_claims`)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	for keys.Next() {
		var (
			sid int64
			v   any
		)
		if err := keys.Scan(&sid, &v); err != nil {
			t.Fatal(err)
		}
		mk, err := memKeyOfStored(v)
		if err != nil {
			t.Fatal(err)
		}
		f := parts[filterKey{sid, partOf(mk)}]
		if f != nil && !f.mayHave(probes(mk)) {
			t.Fatalf("ledger_filter part %d of sync %d says a stored key (%x) is absent", partOf(mk), sid, mk)
		}
	}
	if err := keys.Err(); err != nil {
		t.Fatal(err)
	}
	return len(parts)
}

// TestKeyFilterNeverSaysAbsent: a filter says "may have" for every key it
// was given (hex and text keys, every part), also once encoded and decoded
// as ledger_filter stores it, and "absent" for most other keys.
func TestKeyFilterNeverSaysAbsent(t *testing.T) {
	t.Parallel()
	var keys []string
	for _, k := range storetest.HashedKeys(77, 20000) {
		keys = append(keys, memKeyOf(k))
	}
	for i := range 300 {
		keys = append(keys, memKeyOf(fmt.Sprint("text-", i)), memKeyOf(fmt.Sprintf("%064X", i)))
	}
	keys = append(keys, memKeyOf("é"), memKeyOf("~x"), memKeyOf("0"))
	f := newSyncFilter()
	for _, k := range keys {
		if !f.add(k) {
			t.Fatalf("part %d full after %d keys", partOf(k), f.parts[partOf(k)].n)
		}
	}
	g := &syncFilter{}
	for p, part := range f.parts {
		var err error
		if g.parts[p], err = decodeKeyFilter(int64(part.n), part.encode()); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		if !f.mayHave(k) || !g.mayHave(k) {
			t.Fatalf("filter says %x is absent", k)
		}
	}
	if filterKeys(g) != len(keys) {
		t.Fatalf("decoded filter counts %d keys, want %d", filterKeys(g), len(keys))
	}
	fp := 0
	others := storetest.HashedKeys(78, 20000)
	for _, k := range others {
		if f.mayHave(memKeyOf(k)) {
			fp++
		}
	}
	if fp > len(others)/100 {
		t.Fatalf("%d false positives in %d keys never added", fp, len(others))
	}
}

// partKeys returns n random hex keys whose first byte is part.
func partKeys(part byte, n int) []string {
	out := make([]string, n)
	for i := range out {
		var b [32]byte
		_, _ = rand.Read(b[:])
		b[0] = part
		out[i] = hex.EncodeToString(b[:])
	}
	return out
}

// TestKeyFilterPersistedByMerges: merges write the parts of the keys they
// write (hex and text keys), a part that fills up is built again bigger,
// and a new process's filter comes from ledger_filter with every key.
func TestKeyFilterPersistedByMerges(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	first := append(partKeys(7, 300), "text-a", "text-b")
	lb.claim(t, lb.a, first)
	lb.finish(t, lb.a, first[:200], store.LedgerComplete, "r")
	if err := lb.a.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	// Parts 7 and 256 (text), nothing else.
	if n := checkFilterRows(t, lb.a); n != 2 {
		t.Fatalf("%d ledger_filter rows after a merge of two parts' keys, want 2", n)
	}
	var size0 int
	if err := lb.a.r.QueryRow(`SELECT length(bits) FROM ledger_filter WHERE part = 7`).Scan(&size0); err != nil {
		t.Fatal(err)
	}
	// Enough keys of part 7 to fill it: it is rebuilt from a scan.
	more := partKeys(7, 8*size0/filterBitsPerKey)
	lb.claim(t, lb.a, more)
	lb.finish(t, lb.a, more, store.LedgerComplete, "r2")
	if err := lb.a.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	checkFilterRows(t, lb.a)
	var (
		size1 int
		n     int
	)
	if err := lb.a.r.QueryRow(`SELECT length(bits), n FROM ledger_filter WHERE part = 7`).Scan(&size1, &n); err != nil {
		t.Fatal(err)
	}
	if size1 <= size0 || n != len(first)-2+len(more) {
		t.Fatalf("part 7 after %d more keys: %d bytes (was %d), n %d; want bigger, n %d", len(more), size1, size0, n, len(first)-2+len(more))
	}
	// A new process reads the parts: the rows' counts, and every key.
	c, err := Open(lb.ctx, OpenParams{Path: lb.path, Clock: lb.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	all := append(append([]string{}, first...), more...)
	got := lb.get(t, c, all)
	if len(got) != len(all) {
		t.Fatalf("new process reads %d of %d entries", len(got), len(all))
	}
	f := c.mem.filters[1]
	if f == nil {
		t.Fatal("the new process has no key filter")
	}
	if f.parts[7].n != n {
		t.Fatalf("the new process's part 7 counts %d keys, want the row's %d", f.parts[7].n, n)
	}
}

// TestKeyFilterMergeInterrupted: a background merge round stopped between
// its transactions (its process died) leaves ledger_filter holding every
// key the tables hold after each of them; a new process reads every entry,
// and a later merge completes the filter.
func TestKeyFilterMergeInterrupted(t *testing.T) {
	t.Parallel()
	for _, stopAt := range []int{0, 1, 3, mergeRounds} {
		t.Run(fmt.Sprint("stop after step ", stopAt), func(t *testing.T) {
			t.Parallel()
			lb := setupLog(t)
			ks := append(storetest.HashedKeys(int(90+stopAt), 600), "text-1", "text-2", "text-3")
			lb.claim(t, lb.a, ks)
			lb.finish(t, lb.a, ks[:400], store.LedgerComplete, "r")
			ctx, cancel := context.WithCancel(lb.ctx)
			defer cancel()
			lb.a.merger.betweenTx = func(step int) {
				checkFilterRows(t, lb.a)
				if step == stopAt {
					cancel() // the round's next transaction fails, as if its process died
				}
			}
			err := lb.a.mergeRound(ctx)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("round stopped after step %d: %v, want canceled", stopAt, err)
			}
			lb.a.merger.betweenTx = nil
			checkFilterRows(t, lb.a)
			c, err := Open(lb.ctx, OpenParams{Path: lb.path, Clock: lb.clk})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			check := func(when string, s *Store) {
				t.Helper()
				got := lb.get(t, s, ks)
				if len(got) != len(ks) {
					t.Fatalf("%s: %d of %d entries", when, len(got), len(ks))
				}
				for i, k := range ks {
					want := store.LedgerPending
					if i < 400 {
						want = store.LedgerComplete
					}
					if got[k].State != want {
						t.Fatalf("%s: key %d is %s, want %s", when, i, got[k].State, want)
					}
				}
			}
			check("after the stopped round", c)
			if _, err := lb.a.w.Exec(`UPDATE ledger_meta SET merge_owner = '', merge_until = 0`); err != nil {
				t.Fatal(err)
			}
			if err := c.mergeLog(lb.ctx); err != nil {
				t.Fatal(err)
			}
			checkFilterRows(t, c)
			d, err := Open(lb.ctx, OpenParams{Path: lb.path, Clock: lb.clk})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			check("after a later merge", d)
			if d.mem.size() != 0 {
				t.Fatalf("the new process holds %d log entries, want 0 (all merged)", d.mem.size())
			}
		})
	}
}

// TestKeyFilterUpgrade: a store file from before migration 0019 (merged
// entries, no ledger_filter) opens with every entry readable, its filter
// built from a scan; merges then write the parts they touch.
func TestKeyFilterUpgrade(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	old := append(storetest.HashedKeys(5, 500), "text-old")
	lb.claim(t, lb.a, old)
	lb.finish(t, lb.a, old, store.LedgerComplete, "old")
	if err := lb.a.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	// What a file at migration 18 holds: no ledger_filter table.
	for _, q := range []string{`DROP TABLE ledger_filter`, `DELETE FROM schema_migrations WHERE version = 19`} {
		if _, err := lb.a.w.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	_ = lb.a.Close()
	_ = lb.b.Close()
	c, err := Open(lb.ctx, OpenParams{Path: lb.path, Clock: lb.clk})
	if err != nil {
		t.Fatalf("Open (migrating): %v", err)
	}
	defer c.Close()
	if n := checkFilterRows(t, c); n != 0 {
		t.Fatalf("%d ledger_filter rows after the migration, want 0", n)
	}
	if got := lb.get(t, c, old); len(got) != len(old) {
		t.Fatalf("after the migration: %d of %d entries", len(got), len(old))
	}
	if f := c.mem.filters[1]; f == nil || filterKeys(f) != len(old) {
		t.Fatal("the filter built from a scan does not hold the old keys")
	}
	ks := storetest.HashedKeys(6, 300)
	lb.claim(t, c, ks)
	lb.finish(t, c, ks, store.LedgerComplete, "new")
	if err := c.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	if n := checkFilterRows(t, c); n == 0 {
		t.Fatal("no ledger_filter rows after a merge")
	}
	d, err := Open(lb.ctx, OpenParams{Path: lb.path, Clock: lb.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	all := append(append([]string{}, old...), ks...)
	if got := lb.get(t, d, all); len(got) != len(all) {
		t.Fatalf("after a merge: %d of %d entries", len(got), len(all))
	}
}
