package parquet

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/source"
)

// cursorVersion prefixes every cursor so the format can change later.
const cursorVersion = "q1"

// sumLen is how many bytes of the prefix digest a cursor keeps.
const sumLen = 16

// position is a decoded cursor: a row of one file of the source and the
// digest of every file up to and including that one.
//
// Encoded as "q1:<file>:<row>:<recno>:<sum>": file is the file's path in the
// source's directory (slash-separated; its base name when it is not in a
// subdirectory, so older cursors stay valid), query-escaped (no ':' is left
// in it); row and recno in canonical decimal; sum as 32 lower-case hex
// digits.
type position struct {
	// file is the path of the file the position is in, see validName.
	file string
	// row is the number of rows of file before the position.
	row int64
	// recno is the number of records of the source before the position.
	recno int64
	// sum is the prefix digest through file (see chain), truncated.
	sum [sumLen]byte
}

// String encodes p as a cursor.
func (p position) String() string {
	var b strings.Builder
	b.WriteString(cursorVersion)
	b.WriteByte(':')
	b.WriteString(url.QueryEscape(p.file))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(p.row, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(p.recno, 10))
	b.WriteByte(':')
	b.WriteString(hex.EncodeToString(p.sum[:]))
	return b.String()
}

// validName says whether name is a file's slash-separated path inside the
// source's directory (a base name, or dt=2026-12-01/part-0.parquet): no
// empty, "." or ".." step, no leading slash.
func validName(name string) bool {
	if name == "" || strings.ContainsRune(name, 0) {
		return false
	}
	for _, step := range strings.Split(name, "/") {
		if step == "" || step == "." || step == ".." {
			return false
		}
	}
	return true
}

// parseCursor decodes a cursor made by position.String. Only the canonical
// encoding is accepted. Errors wrap source.ErrBadCursor and never repeat the
// cursor.
func parseCursor(s string) (position, error) {
	var p position
	parts := strings.Split(s, ":")
	if len(parts) != 5 || parts[0] != cursorVersion {
		return p, fmt.Errorf("%w: not a parquet cursor of version %s", source.ErrBadCursor, cursorVersion)
	}
	name, err := url.QueryUnescape(parts[1])
	if err != nil || !validName(name) {
		return p, fmt.Errorf("%w: bad file name", source.ErrBadCursor)
	}
	p.file = name
	if p.row, err = strconv.ParseInt(parts[2], 10, 64); err != nil || p.row < 0 {
		return p, fmt.Errorf("%w: bad row", source.ErrBadCursor)
	}
	if p.recno, err = strconv.ParseInt(parts[3], 10, 64); err != nil || p.recno < p.row {
		return p, fmt.Errorf("%w: bad record number", source.ErrBadCursor)
	}
	if len(parts[4]) != 2*sumLen {
		return p, fmt.Errorf("%w: bad checksum length", source.ErrBadCursor)
	}
	if _, err := hex.Decode(p.sum[:], []byte(parts[4])); err != nil {
		return p, fmt.Errorf("%w: bad checksum", source.ErrBadCursor)
	}
	if p.String() != s {
		return p, fmt.Errorf("%w: not in canonical form", source.ErrBadCursor)
	}
	return p, nil
}

// Describe says where a cursor is in words ("after row 2,000 of
// part-0001.parquet, record 12,000 of the source"), without reading the
// source; base names the file or directory configured.
func Describe(base, cursor string) string {
	if cursor == "" {
		return "start of " + base
	}
	p, err := parseCursor(cursor)
	if err != nil {
		return "a cursor this oncesync cannot read (" + base + ")"
	}
	if p.file == base || p.row == p.recno {
		return fmt.Sprintf("after row %s of %s", thousands(p.row), p.file)
	}
	return fmt.Sprintf("after row %s of %s (record %s of %s)", thousands(p.row), p.file, thousands(p.recno), base)
}

var _ source.Progressor = (*Source)(nil)

// Progress is the cursor's record number of the rows of every file, from
// their footers (no data page is read).
func (s *Source) Progress(ctx context.Context, cursor string) (source.Position, error) {
	l, err := s.list(ctx)
	if err != nil {
		return source.Position{}, err
	}
	var total int64
	for _, name := range l.names {
		if err := ctx.Err(); err != nil {
			return source.Position{}, err
		}
		n, err := s.footerRows(ctx, l.path(name))
		if err != nil {
			return source.Position{}, err
		}
		total += n
	}
	pos := source.Position{Total: total, Where: Describe(l.base, cursor)}
	if cursor != "" {
		p, err := parseCursor(cursor)
		if err != nil {
			return source.Position{}, fmt.Errorf("%s: %w", s.id, err)
		}
		pos.Done = min(p.recno, total)
	}
	return pos, nil
}

// thousands writes n with comma separators (2,000).
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
