package mysql

import (
	"context"
	"strconv"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/slicesql"
)

// Reading one partition's rows: source/slicesql builds the condition
// (exact or a superset, see there); the runner's partition.Filter stays
// the exact check.

const (
	// maxSliceText bounds the identity texts the condition hashes; longer
	// texts pass it and are left to partition.Filter.
	maxSliceText = 40
	// maxIntDigits and maxUintDigits are the digits of the widest BIGINT
	// and BIGINT UNSIGNED.
	maxIntDigits  = 19
	maxUintDigits = 20
)

// dialect is MySQL's spelling of the operators.
var dialect = slicesql.Dialect{Xor: "^", Div: "DIV"}

var _ source.Slicer = (*Source)(nil)

// ReadSlice is ReadPage over the rows of slice only, or a superset of them
// (see source/slicesql); its cursors are ReadPage's. A source whose
// identity column is not slice.Identity, or of a type the condition cannot
// hash, reads every row (ReadPage).
func (s *Source) ReadSlice(ctx context.Context, slice source.Slice, cursor string, size int) (source.Page, error) {
	return s.read(ctx, cursor, size, func() string {
		cond, _ := s.sliceCond(slice)
		return cond
	})
}

// SliceExact reports whether ReadSlice reads exactly slice's rows (true) or
// a superset of them, every row when the source cannot narrow it.
func (s *Source) SliceExact(slice source.Slice) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, exact := s.sliceCond(slice)
	return exact
}

// sliceCond returns the condition of slice ("": none), built once, and
// whether it is exact. s.mu must be held.
func (s *Source) sliceCond(slice source.Slice) (string, bool) {
	if s.slices == nil {
		s.slices = map[source.Slice]string{}
	}
	cond, ok := s.slices[slice]
	if !ok {
		cond = s.buildSliceCond(slice)
		s.slices[slice] = cond
	}
	_, _, exact, _ := slicesql.Bits(slice.N, slice.K)
	return cond, cond != "" && exact && kindOf(s.identType) != kindText
}

func (s *Source) buildSliceCond(slice source.Slice) string {
	mask, want, _, ok := slicesql.Bits(slice.N, slice.K)
	if !ok || slice.Identity == "" || slice.Identity != s.identity {
		return ""
	}
	ref := col(slice.Identity)
	switch s.identType {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT",
		"UNSIGNED TINYINT", "UNSIGNED SMALLINT", "UNSIGNED MEDIUMINT", "UNSIGNED INT":
		return "(" + dialect.Integer(ref, maxIntDigits, true, mask) + ") = " + strconv.Itoa(want)
	case "UNSIGNED BIGINT":
		return "(" + dialect.Integer(ref, maxUintDigits, false, mask) + ") = " + strconv.Itoa(want)
	case "CHAR", "VARCHAR", "TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT":
		// The bytes a record holds: its UTF-8 text (the session's charset).
		b := "CAST(CONVERT(" + ref + " USING utf8mb4) AS BINARY)"
		byteAt := func(i int) string { return "ASCII(SUBSTRING(" + b + ", " + strconv.Itoa(i+1) + ", 1))" }
		return dialect.Text("LENGTH("+b+")", byteAt, maxSliceText, mask, want)
	}
	// Others (YEAR, DECIMAL, dates...): no condition; their text is left
	// to partition.Filter.
	return ""
}
