// Package file reads CSV and JSONL files as oncesync sources.
//
// A file is streamed, never loaded whole: memory is bounded by the page size
// (and max_record_bytes: a longer record is refused having read about that
// much of it), not by the file size. A cursor is a byte offset at
// a record boundary plus a checksum of every byte before it, so a file that
// changed under a saved cursor is detected (source.ErrChanged) rather than
// misread; rows appended after the cursor are fine. Between sequential
// ReadPage calls the file stays open and the checksum runs on, so a whole pass
// reads and hashes the file once; only a resume from any other cursor (a new
// process, a retry) hashes the prefix again.
//
// At the end of the file Page.End is true and Page.Next is "": the sync's next
// run reads the whole file again, and the ledger makes unchanged records free.
package file

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/oncesync/oncesync/internal/source"
)

// Format is the layout of a file.
type Format int

const (
	// CSV is RFC 4180 CSV whose first row is the header; every value is a string.
	CSV Format = iota + 1
	// JSONL is one JSON object per line; numbers decode as json.Number so large
	// ids keep their digits.
	JSONL
)

// String returns "csv" or "jsonl".
func (f Format) String() string {
	switch f {
	case CSV:
		return "csv"
	case JSONL:
		return "jsonl"
	default:
		return fmt.Sprintf("Format(%d)", int(f))
	}
}

// ParseFormat returns the Format named s ("csv" or "jsonl", any case).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "csv":
		return CSV, nil
	case "jsonl":
		return JSONL, nil
	default:
		return 0, fmt.Errorf("file format %q: want csv or jsonl: %w", s, source.ErrInvalid)
	}
}

// Params configures a Source.
type Params struct {
	// Path is the file to read; a relative path is made absolute at New.
	Path string
	// Format is CSV or JSONL.
	Format Format
	// MaxRecordBytes bounds one record's bytes in the file; a longer one
	// fails the read with a *ParseError (source.ErrInvalid) having read
	// about that much of it. 0 is DefaultMaxRecordBytes.
	MaxRecordBytes int64
}

// DefaultMaxRecordBytes is the record limit when Params leave it 0.
const DefaultMaxRecordBytes = 1 << 20

// Source reads a CSV or JSONL file. It is used by one run at a time.
type Source struct {
	path      string
	format    Format
	id        string
	maxRecord int64
	st        *stream
	// hashed counts the bytes put through the prefix checksum (see tests).
	hashed int64
	// header is the CSV header the last stream opened read ([] for a
	// file with none, nil before a stream or for JSONL): Columns.
	header []string
}

var _ source.Columner = (*Source)(nil)

// Columns is the CSV header of the file as last opened ([] for an empty
// file), nil for JSONL or before a read: a run that read no rows still
// checks the mapping against it.
func (s *Source) Columns() []string {
	if s.header == nil {
		return nil
	}
	named := make([]string, 0, len(s.header))
	for _, c := range s.header {
		if c != "" { // an unnamed column is not read (readHeader)
			named = append(named, c)
		}
	}
	return named
}

var _ source.Source = (*Source)(nil)

// New returns a Source over the file at p.Path. The file is opened by
// ReadPage, so a missing file is reported there (wrapping source.ErrUnavailable).
func New(p Params) (*Source, error) {
	if p.Format != CSV && p.Format != JSONL {
		return nil, fmt.Errorf("file source: %v: want CSV or JSONL: %w", p.Format, source.ErrInvalid)
	}
	if p.Path == "" {
		return nil, fmt.Errorf("file source: empty path: %w", source.ErrInvalid)
	}
	abs, err := filepath.Abs(p.Path)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	m := p.MaxRecordBytes
	if m <= 0 {
		m = DefaultMaxRecordBytes
	}
	return &Source{path: abs, format: p.Format, id: p.Format.String() + ":" + abs, maxRecord: m}, nil
}

// ID returns "csv:" or "jsonl:" followed by the cleaned absolute path.
func (s *Source) ID() string { return s.id }

var _ source.Snapshotter = (*Source)(nil)

// Snapshot is the SHA-256 of the file's content: {"sha256": hex}.
func (s *Source) Snapshot(ctx context.Context) (map[string]any, error) {
	f, err := source.OpenFile(ctx, s.path)
	if err != nil {
		return nil, fmt.Errorf("file source: %w: %w", source.ErrUnavailable, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("file source: read %s for its snapshot: %w: %w", filepath.Base(s.path), source.ErrUnavailable, err)
	}
	return map[string]any{"sha256": hex.EncodeToString(h.Sum(nil))}, nil
}

// Close closes the file if it is open. The Source may be used again after.
func (s *Source) Close() error {
	if s.st == nil {
		return nil
	}
	err := s.st.f.Close()
	s.st = nil
	return err
}

// stream is an open file read sequentially from one position onwards.
type stream struct {
	f *source.File // its calls end with the page's context
	// fi is the file's size and time of change when its bytes read so far
	// were last known to be the file's (see Source.checkUnchanged).
	fi  os.FileInfo
	tap *tap
	p   parser
	// recno counts the records before tap.base.
	recno int64
	// next is the Next of the last page returned: a ReadPage at it continues
	// the stream without hashing the prefix again.
	next string
	// peeked is the record read ahead to tell whether the last page was the end.
	peeked *record
	// err is an error met while reading ahead, for the next page.
	err error
}

func (st *stream) take() (record, error) {
	if st.err != nil {
		return record{}, st.err
	}
	if st.peeked != nil {
		r := *st.peeked
		st.peeked = nil
		return r, nil
	}
	return st.p.next()
}

func (st *stream) position() position {
	p := position{offset: st.tap.base, recno: st.recno}
	var sum [sha256.Size]byte
	copy(p.sum[:], st.tap.h.Sum(sum[:0]))
	return p
}

// ReadPage reads up to size records at cursor ("" is the start of the file).
//
// Errors wrap source.ErrBadCursor (cursor cannot be decoded),
// source.ErrChanged (the bytes before the cursor are not those the cursor was
// made from, or the file shrank), source.ErrInvalid (malformed data: a
// *ParseError naming the line), source.ErrUnavailable (the file cannot be
// opened or read) or the context's error.
func (s *Source) ReadPage(ctx context.Context, cursor string, size int) (source.Page, error) {
	if size < 1 {
		return source.Page{}, fmt.Errorf("%s: page size %d: must be at least 1", s.id, size)
	}
	if err := ctx.Err(); err != nil {
		return source.Page{}, err
	}
	if s.st == nil || cursor == "" || cursor != s.st.next {
		var pos position
		if cursor != "" {
			var err error
			if pos, err = parseCursor(cursor); err != nil {
				return source.Page{}, fmt.Errorf("%s: %w", s.id, err)
			}
		}
		_ = s.Close()
		st, err := s.open(ctx, pos)
		if err != nil {
			return source.Page{}, err
		}
		s.st = st
	} else {
		s.st.f.Use(ctx)
		if err := s.checkSize(); err != nil {
			_ = s.Close()
			return source.Page{}, err
		}
	}
	page, err := s.fill(ctx, cursor, size)
	if err != nil || page.End {
		_ = s.Close()
	}
	if err != nil {
		return source.Page{}, err
	}
	return page, nil
}

// checkSize catches a file truncated under an open stream.
func (s *Source) checkSize() error {
	fi, err := s.st.f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	if fi.Size() < s.st.tap.base {
		return fmt.Errorf("%s: %w: the file is shorter than the position read so far", s.id, source.ErrChanged)
	}
	return nil
}

func (s *Source) fill(ctx context.Context, cursor string, size int) (source.Page, error) {
	st := s.st
	page := source.Page{Cursor: cursor, Records: make([]source.Record, 0, min(size, 4096))}
	for len(page.Records) < size {
		if err := ctx.Err(); err != nil {
			return source.Page{}, err
		}
		rec, err := st.take()
		if err == io.EOF {
			page.End = true
			return page, s.checkUnchanged()
		}
		if err != nil {
			return source.Page{}, s.readError(err)
		}
		if torn, err := s.torn(rec); err != nil || torn {
			// The file's last line, still being appended: the run ends
			// before it, and the next run reads it whole.
			page.End = true
			return page, errors.Join(err, s.checkUnchanged())
		}
		st.tap.advance(rec.end)
		st.recno++
		page.Records = append(page.Records, source.Record{Fields: rec.fields, Invalid: rec.invalid, Line: rec.line})
	}
	page.Next = st.position().String()
	st.next = page.Next
	// Read one record ahead so the last page, not an empty one after it, ends
	// the file. The record is not hashed: it belongs to the next page.
	switch rec, err := st.p.next(); {
	case err == io.EOF:
		page.End = true
		page.Next = ""
	case err != nil:
		st.err = err
	default:
		st.peeked = &rec
	}
	return page, s.checkUnchanged()
}

// torn reports whether rec is a last line that has no line end yet while
// the file has grown past it: a writer appending the file wrote part of the
// line when it was read (a buffered writer flushes at any byte), so its
// values are cut (an address "ann@example.c"). A file whose last line has
// no line end and that does not grow is read as it is.
func (s *Source) torn(rec record) (bool, error) {
	t := s.st.tap
	i := t.start + int(rec.end-t.base) - 1
	if i < t.start || i >= len(t.buf) || t.buf[i] == '\n' {
		return false, nil
	}
	fi, err := s.st.f.Stat()
	if err != nil {
		return false, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	return fi.Size() > rec.end, nil
}

// checkUnchanged fails the page when the file was written in place while
// the page was read (truncated and written again: an export that rewrites
// its file), so that no record is made of old bytes followed by new ones,
// and no page of the old file's first part is followed by one of the new
// file's rest (docs/guide.md#rows-committed-late, on file cursors). A file
// whose size and time of change did not move costs one fstat a page; one
// that did (an append) costs reading again the bytes read since the last
// page, which must be the file's. A file replaced by a rename is not seen:
// the stream reads the file it opened to its end.
func (s *Source) checkUnchanged() error {
	st := s.st
	fi, err := st.f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	if st.fi != nil && fi.Size() == st.fi.Size() && fi.ModTime().Equal(st.fi.ModTime()) {
		st.tap.checked()
		return nil
	}
	off, n, sum := st.tap.read()
	h := crc32.New(castagnoli)
	m, err := io.Copy(h, io.NewSectionReader(st.f, off, n))
	if err != nil {
		return fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	if m < n || h.Sum32() != sum {
		return fmt.Errorf("%s: %w: the file was written over while it was read", s.id, source.ErrChanged)
	}
	st.fi = fi
	st.tap.checked()
	return nil
}

func (s *Source) readError(err error) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", s.id, err)
	}
	return fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
}

// open opens the file and positions a stream at pos, verifying the checksum of
// the bytes before it.
func (s *Source) open(ctx context.Context, pos position) (*stream, error) {
	f, err := source.OpenFile(ctx, s.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	st, err := s.openFile(f, pos)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return st, nil
}

func (s *Source) openFile(f *source.File, pos position) (*stream, error) {
	// Before any byte is read: a write after it shows in the next check.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	h := sha256.New()
	var (
		lines int64 // '\n' bytes before pos
		start int64 // where the data starts (after a BOM)
	)
	if pos.offset > 0 {
		if fi.Size() < pos.offset {
			return nil, fmt.Errorf("%s: %w: the file is shorter than the saved position", s.id, source.ErrChanged)
		}
		var first []byte
		if lines, first, err = hashPrefix(f, pos.offset, h); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%s: %w: the file is shorter than the saved position", s.id, source.ErrChanged)
			}
			return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
		}
		s.hashed += pos.offset
		var sum [sha256.Size]byte
		if !bytes.Equal(h.Sum(sum[:0])[:sumLen], pos.sum[:]) {
			return nil, fmt.Errorf("%s: %w: the bytes before the saved position differ", s.id, source.ErrChanged)
		}
		if bytes.HasPrefix(first, bom) {
			start = int64(len(bom))
		}
		if _, err := f.Seek(pos.offset, io.SeekStart); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
		}
	}
	t := &tap{r: f, h: h, base: pos.offset, since: pos.offset, hashed: &s.hashed}
	lim := &limiter{r: t, off: pos.offset, max: s.maxRecord}
	lim.bound(pos.offset)
	br := bufio.NewReaderSize(lim, bufSize)
	if pos.offset == 0 {
		head, err := br.Peek(10)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
		}
		tail := make([]byte, 4)
		if fi.Size() < int64(len(tail)) {
			tail = nil
		} else if _, err := f.ReadAt(tail, fi.Size()-int64(len(tail))); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
		}
		if what := binaryKind(head, tail); what != "" {
			return nil, fmt.Errorf("%s: the file %s: %w", s.id, what, source.ErrInvalid)
		}
		if bytes.HasPrefix(head, bom) {
			_, _ = br.Discard(len(bom))
			start = int64(len(bom))
		}
	}
	st := &stream{f: f, fi: fi, tap: t, recno: pos.recno}
	switch s.format {
	case JSONL:
		st.p = &jsonlParser{r: br, off: max(pos.offset, start), line: lines, lim: lim}
	case CSV:
		// The separator is the header line's (of its first bufSize bytes:
		// a longer header is comma-separated as far as this goes), read
		// aside so that the stream's reader and limiter are untouched.
		head := make([]byte, bufSize)
		n, err := f.ReadAt(head, start)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
		}
		sep := separator(head[:n])
		p := &csvParser{r: newCSVReader(br, sep), base: max(pos.offset, start), baseLine: lines + 1, lim: lim, line: lines + 1}
		if pos.offset == 0 {
			header, err := readHeader(p.r, 1, lim)
			switch {
			case err == io.EOF:
				p.empty = true
				s.header = []string{}
			case err != nil:
				return nil, s.readError(err)
			default:
				p.header = header
				s.header = header
				t.advance(p.base + p.r.InputOffset())
				lim.bound(p.base + p.r.InputOffset())
				p.line = endLine(p.r, header, 1) + 1
			}
		} else {
			// The header is in the verified prefix: read it from there.
			hr := newCSVReader(bufio.NewReaderSize(io.NewSectionReader(f, start, 1<<62), 4096), sep)
			header, err := readHeader(hr, 1, nil)
			if err != nil || start+hr.InputOffset() > pos.offset {
				return nil, fmt.Errorf("%s: %w: no header before the position", s.id, source.ErrBadCursor)
			}
			p.header = header
			s.header = header
		}
		st.p = p
	}
	return st, nil
}

// hashPrefix writes the first n bytes of f to h. It returns how many of them
// are '\n' and up to the first three of them.
func hashPrefix(f io.ReaderAt, n int64, h io.Writer) (lines int64, first []byte, err error) {
	buf := make([]byte, min(n, bufSize))
	var off int64
	for off < n {
		m, err := f.ReadAt(buf[:min(int64(len(buf)), n-off)], off)
		if m > 0 {
			chunk := buf[:m]
			if off == 0 {
				first = append(first, chunk[:min(m, len(bom))]...)
			}
			h.Write(chunk)
			lines += int64(bytes.Count(chunk, []byte{'\n'}))
			off += int64(m)
		}
		if err != nil && off < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, err
		}
	}
	return lines, first, nil
}
