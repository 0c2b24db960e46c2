package postgres

import (
	"context"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncesync/oncesync/internal/source"
)

// Reading one partition's rows (docs/guide.md#which-rows-a-partition-reads).
//
// A partition keeps the rows whose identity text hashes to it: FNV-1a 64 of
// the text, mod N (partition.Of). PostgreSQL cannot compute that 64-bit
// product without overflow errors, but the low bits of FNV-1a depend only
// on the low bits of each step: with h' = (h XOR byte) * prime mod 2^64,
// h' mod 2^a = ((h mod 2^a) XOR byte) * (prime mod 2^a) mod 2^a for a <= 8.
// So the query computes h mod 2^a, a = the number of trailing zero bits of
// N, in small integers:
//
//   - N a power of two (2, 4, ..., 64): h mod N is exactly the partition,
//     the predicate is exact for integer identities, and for text ones of
//     up to maxSliceText bytes (longer texts pass);
//   - N = 2^a * odd, a >= 1 (6, 12, ...): h mod 2^a = (k-1) mod 2^a is a
//     superset of the partition's rows (one row in 2^a, not one in N);
//   - N odd: no predicate narrows anything; the whole source is read.
//
// Every way, the runner still applies partition.Filter, the exact check, so
// which rows belong to which partition is what it always was.

const (
	// fnvOffset and fnvPrime are FNV-1a 64's (hash/fnv).
	fnvOffset = 0xcbf29ce484222325
	fnvPrime  = 0x100000001b3
	// maxSliceText bounds the identity texts the predicate hashes: the SQL
	// holds one unrolled branch per length, so it grows with the square of
	// this. Longer texts (uuids are 36 bytes) pass the predicate and are
	// left to partition.Filter.
	maxSliceText = 40
	// maxInt8Digits is the digits of the widest bigint.
	maxInt8Digits = 19
	// sliceAlias names the lateral subquery holding the identity's bytes.
	sliceAlias = "oncesync_slice"
)

// identityKind is how the predicate reads the identity column's text.
type identityKind int

const (
	// identityOther: no predicate (its Go text is not PostgreSQL's, e.g.
	// timestamps, or its cast to text differs from its output, e.g.
	// char(n)).
	identityOther identityKind = iota
	// identityInteger: smallint, integer, bigint; digits by arithmetic.
	identityInteger
	// identityText: text, varchar, uuid, numeric; bytes of its ::text, which
	// is the output function's text, the value the record holds.
	identityText
)

func kindOf(oid uint32) identityKind {
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		return identityInteger
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.UUIDOID, pgtype.NumericOID:
		return identityText
	}
	return identityOther
}

// sliceQuery is the page statements of one slice.
type sliceQuery struct {
	first, next string
	// exact reports a predicate that keeps exactly the slice's rows.
	exact bool
}

var _ source.Slicer = (*Source)(nil)

// ReadSlice is ReadPage over the rows of slice only, or a superset of them
// (see the comment at the top of this file); its cursors are ReadPage's.
// A source whose identity column is not slice.Identity, or of a type the
// predicate cannot hash, reads every row (ReadPage).
func (s *Source) ReadSlice(ctx context.Context, slice source.Slice, cursor string, size int) (source.Page, error) {
	if size < 1 {
		return source.Page{}, fmt.Errorf("%s: page size %d: must be at least 1: %w", s.id, size, source.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return source.Page{}, err
	}
	pos, err := parseCursor(cursor, len(s.keys))
	if err != nil {
		return source.Page{}, fmt.Errorf("%s: %w", s.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.sliceQueryOf(slice)
	if !ok {
		q = sliceQuery{first: s.firstSQL, next: s.nextSQL}
	}
	var page source.Page
	err = s.snapshot(ctx, "read page", func(tx pgx.Tx) error {
		if ok {
			// The predicate's long expression makes the planner expect a
			// costly scan and compile it with JIT, which takes seconds; a
			// page stops at its LIMIT long before that pays.
			if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
				return err
			}
		}
		var err error
		page, err = s.readPageSQL(ctx, tx, pageSQL{first: q.first, next: q.next, identOID: s.identOID, checkIdent: ok}, cursor, pos, size)
		return err
	})
	if err != nil {
		return source.Page{}, err
	}
	return page, nil
}

// SliceExact reports whether ReadSlice reads exactly slice's rows (true) or
// a superset of them, every row when the source cannot narrow it.
func (s *Source) SliceExact(slice source.Slice) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.sliceQueryOf(slice)
	return ok && q.exact
}

// sliceQueryOf returns the statements of slice, building them once; false
// when no predicate narrows the read. s.mu must be held.
func (s *Source) sliceQueryOf(slice source.Slice) (sliceQuery, bool) {
	if q, ok := s.slices[slice]; ok {
		return q, q.first != ""
	}
	var q sliceQuery
	if slice.N >= 2 && slice.K >= 1 && slice.K <= slice.N && slice.Identity != "" && slice.Identity == s.identity {
		if pred, lateral, exact, ok := slicePredicate(kindOf(s.identOID), col(slice.Identity), slice.N, slice.K); ok {
			q.first, q.next = s.pageSQL(lateral, pred)
			q.exact = exact
		}
	}
	if s.slices == nil {
		s.slices = map[source.Slice]sliceQuery{}
	}
	s.slices[slice] = q
	return q, q.first != ""
}

// slicePredicate returns the condition keeping the rows of partition k of
// n whose identity is ref (a column of src) and the lateral subquery it
// reads, exact when it keeps only those rows; false when nothing narrows.
func slicePredicate(kind identityKind, ref string, n, k int) (pred, lateral string, exact, ok bool) {
	a := bits.TrailingZeros(uint(n))
	if a == 0 || kind == identityOther {
		return "", "", false, false
	}
	mask := 1<<a - 1
	want := strconv.Itoa((k - 1) & mask)
	exact = n == 1<<a && kind == identityInteger
	switch kind {
	case identityInteger:
		return integerPredicate(ref, mask) + " = " + want, "", exact, true
	default:
		b := sliceAlias + ".b"
		lateral = " CROSS JOIN LATERAL (SELECT convert_to(" + ref + "::text, 'UTF8') AS b OFFSET 0) AS " + sliceAlias
		var sb strings.Builder
		sb.WriteString("CASE octet_length(" + b + ")")
		for l := 0; l <= maxSliceText; l++ {
			sb.WriteString(" WHEN " + strconv.Itoa(l) + " THEN ")
			sb.WriteString(fnvLowBits(mask, l, func(i int) string { return "get_byte(" + b + ", " + strconv.Itoa(i) + ")" }))
			sb.WriteString(" = " + want)
		}
		// Longer texts are kept: partition.Filter decides.
		sb.WriteString(" ELSE true END")
		return sb.String(), lateral, exact, true
	}
}

// integerPredicate is FNV-1a 64 mod (mask+1) of an integer's decimal text,
// its digits taken by arithmetic (no text is built): one branch per number
// of digits, and a "-" first for negative numbers.
func integerPredicate(ref string, mask int) string {
	digit := func(l int) func(i int) string {
		return func(i int) string {
			// abs of a remainder: a negative number's digits without
			// negating it (-9223372036854775808 has no positive).
			p := l - 1 - i
			if p == 0 {
				return "(48 + abs(" + ref + " % 10))"
			}
			return "(48 + abs(" + ref + " / " + pow10(p) + " % 10))"
		}
	}
	var sb strings.Builder
	sb.WriteString("CASE WHEN " + ref + " >= 0 THEN CASE")
	for l := 1; l <= maxInt8Digits; l++ {
		if l < maxInt8Digits {
			sb.WriteString(" WHEN " + ref + " < " + pow10(l) + " THEN ")
		} else {
			sb.WriteString(" ELSE ")
		}
		sb.WriteString(fnvLowBits(mask, l, digit(l)))
	}
	sb.WriteString(" END ELSE CASE")
	for l := 1; l <= maxInt8Digits; l++ {
		if l < maxInt8Digits {
			sb.WriteString(" WHEN " + ref + " > -" + pow10(l) + " THEN ")
		} else {
			sb.WriteString(" ELSE ")
		}
		d := digit(l)
		sb.WriteString(fnvLowBits(mask, l+1, func(i int) string {
			if i == 0 {
				return "45" // '-'
			}
			return d(i - 1)
		}))
	}
	sb.WriteString(" END END")
	return sb.String()
}

// fnvLowBits is FNV-1a 64 mod (mask+1) (mask+1 <= 256) of the l bytes
// byteAt(0..l-1), unrolled: ((h XOR byte) * prime) mod 2^a per byte.
func fnvLowBits(mask, l int, byteAt func(i int) string) string {
	m := strconv.Itoa(mask)
	prime := strconv.FormatUint(fnvPrime&uint64(mask), 10)
	e := strconv.FormatUint(fnvOffset&uint64(mask), 10)
	for i := 0; i < l; i++ {
		e = "((" + e + " # " + byteAt(i) + ") * " + prime + " & " + m + ")"
	}
	return e
}

func pow10(p int) string { return "1" + strings.Repeat("0", p) }
