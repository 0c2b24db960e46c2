package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/source"
)

// emptySum is the truncated SHA-256 of no bytes.
var emptySum = func() (s [sumLen]byte) {
	h := sha256.Sum256(nil)
	copy(s[:], h[:])
	return s
}()

// cursorVersion prefixes every cursor so the format can change later.
const cursorVersion = "f1"

// sumLen is how many bytes of the prefix's SHA-256 a cursor keeps.
const sumLen = 16

// position is a decoded cursor: a record boundary in the file and the checksum
// of every byte before it.
//
// Encoded as "f1:<offset>:<recno>:<sum>", with offset and recno in canonical
// decimal and sum as 32 lower-case hex digits.
type position struct {
	// offset is the number of bytes before the position.
	offset int64
	// recno is the number of records before the position.
	recno int64
	// sum is SHA-256 of the file's first offset bytes, truncated to sumLen.
	sum [sumLen]byte
}

// String encodes p as a cursor.
func (p position) String() string {
	var b strings.Builder
	b.Grow(len(cursorVersion) + 3 + 2*20 + 2*sumLen)
	b.WriteString(cursorVersion)
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(p.offset, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(p.recno, 10))
	b.WriteByte(':')
	var h [2 * sumLen]byte
	hex.Encode(h[:], p.sum[:])
	b.Write(h[:])
	return b.String()
}

// parseCursor decodes a cursor made by position.String. Only the canonical
// encoding is accepted, so decoding and encoding again gives back s. Errors
// wrap source.ErrBadCursor and never repeat the cursor.
func parseCursor(s string) (position, error) {
	var p position
	parts := strings.Split(s, ":")
	if len(parts) != 4 || parts[0] != cursorVersion {
		return p, fmt.Errorf("%w: not a file cursor of version %s", source.ErrBadCursor, cursorVersion)
	}
	var err error
	if p.offset, err = strconv.ParseInt(parts[1], 10, 64); err != nil || p.offset < 0 {
		return p, fmt.Errorf("%w: bad offset", source.ErrBadCursor)
	}
	if p.recno, err = strconv.ParseInt(parts[2], 10, 64); err != nil || p.recno < 0 {
		return p, fmt.Errorf("%w: bad record number", source.ErrBadCursor)
	}
	if p.recno > p.offset {
		// Every record takes at least one byte.
		return p, fmt.Errorf("%w: record number beyond offset", source.ErrBadCursor)
	}
	if len(parts[3]) != 2*sumLen {
		return p, fmt.Errorf("%w: bad checksum length", source.ErrBadCursor)
	}
	if _, err := hex.Decode(p.sum[:], []byte(parts[3])); err != nil {
		return p, fmt.Errorf("%w: bad checksum", source.ErrBadCursor)
	}
	if p.offset == 0 && p.sum != emptySum {
		return p, fmt.Errorf("%w: bad checksum", source.ErrBadCursor)
	}
	if p.String() != s {
		return p, fmt.Errorf("%w: not in canonical form", source.ErrBadCursor)
	}
	return p, nil
}

var _ source.Progressor = (*Source)(nil)

// Progress is the cursor's byte offset of the file's size: a run's progress
// in bytes (records vary in length, the file's size does not need a pass
// over it).
func (s *Source) Progress(ctx context.Context, cursor string) (source.Position, error) {
	fi, err := source.Stat(ctx, s.path)
	if err != nil {
		return source.Position{}, fmt.Errorf("file source: %w: %w", source.ErrUnavailable, err)
	}
	name := filepath.Base(s.path)
	if cursor == "" {
		return source.Position{Total: fi.Size(), InBytes: true, Where: "start of " + name}, nil
	}
	p, err := parseCursor(cursor)
	if err != nil {
		return source.Position{}, err
	}
	return source.Position{Done: min(p.offset, fi.Size()), Total: fi.Size(), InBytes: true,
		Where: fmt.Sprintf("after record %s of %s", thousands(p.recno), name)}, nil
}

// thousands writes n with comma separators (2,000).
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
