package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/slicesql"
)

// Reading one partition's rows: source/slicesql builds the condition
// (exact or a superset, see there); the runner's partition.Filter stays
// the exact check.

const (
	// maxSliceText bounds the identity texts the condition hashes; longer
	// texts (uuids are 36 bytes) pass it and are left to partition.Filter.
	maxSliceText = 40
	// maxInt8Digits is the digits of the widest bigint.
	maxInt8Digits = 19
	// sliceAlias names the lateral subquery holding the identity's bytes.
	sliceAlias = "oncesync_slice"
)

// dialect is PostgreSQL's spelling of the operators.
var dialect = slicesql.Dialect{Xor: "#", Div: "/"}

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
	statements
	// exact reports a predicate that keeps exactly the slice's rows.
	exact bool
}

var _ source.Slicer = (*Source)(nil)

// ReadSlice is ReadPage over the rows of slice only, or a superset of them
// (see the comment at the top of this file); its cursors are ReadPage's.
// A source whose identity column is not slice.Identity, or of a type the
// predicate cannot hash, reads every row (ReadPage).
func (s *Source) ReadSlice(ctx context.Context, slice source.Slice, cursor string, size int) (source.Page, error) {
	return s.read(ctx, cursor, size, func() (sliceQuery, bool) { return s.sliceQueryOf(slice) })
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
			q.statements = s.pageSQL(lateral, pred)
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
	mask, want, exact, ok := slicesql.Bits(n, k)
	if !ok || kind == identityOther {
		return "", "", false, false
	}
	if kind == identityInteger {
		return "(" + dialect.Integer(ref, maxInt8Digits, true, mask) + ") = " + strconv.Itoa(want), "", exact, true
	}
	// The bytes once per row: a lateral subquery (OFFSET 0 keeps the
	// planner from pasting convert_to into every use).
	b := sliceAlias + ".b"
	lateral = " CROSS JOIN LATERAL (SELECT convert_to(" + ref + "::text, 'UTF8') AS b OFFSET 0) AS " + sliceAlias
	byteAt := func(i int) string { return "get_byte(" + b + ", " + strconv.Itoa(i) + ")" }
	// Longer texts pass: not exact.
	return dialect.Text("octet_length("+b+")", byteAt, maxSliceText, mask, want), lateral, false, true
}
