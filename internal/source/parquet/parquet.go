// Package parquet reads Parquet files as an oncesync source: one file, or a
// directory of *.parquet files, partition subdirectories included, read in
// the order of their paths, as warehouses export them (part-00000.parquet,
// dt=2026-12-01/part-00000.parquet, ...).
//
// Files are read with parquet-go (pure Go) row group by row group, a few
// rows at a time: memory is bounded by a page of each column, not by the
// file. A cursor names a file and a row in it, with a digest of the content
// of every file up to that one, so a file rewritten or inserted before the
// cursor is detected (source.ErrChanged) rather than misread; a file added
// after it is simply read. Between sequential ReadPage calls the file stays
// open; a resume from any other cursor (a new process) hashes the files up
// to the cursor's again. A file written over in place, or replaced, while a
// page is read from it fails that page with source.ErrChanged (a page is
// returned only when every file it read is, by its stat, the one opened
// and hashed), not with the errors of pages decoded from the new bytes.
//
// At the end, Page.End is true and Page.Next is "": like the CSV source, the
// sync's next run reads every file again and the ledger makes unchanged rows
// free, so a file added since is the only thing sent.
package parquet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	pq "github.com/parquet-go/parquet-go"

	"github.com/oncesync/oncesync/internal/source"
)

// DefaultMaxRecordBytes is the largest record read when Params leave it 0.
const DefaultMaxRecordBytes = 1 << 20

// batch is how many rows are decoded at a time.
const batch = 64

// Params configures a Source.
type Params struct {
	// Path is a .parquet file or a directory of them; a relative path is made
	// absolute at New.
	Path string
	// MaxRecordBytes bounds one record (the sum of its values' sizes); a
	// larger one fails the read with source.ErrInvalid. 0 is
	// DefaultMaxRecordBytes.
	MaxRecordBytes int64
}

// Source reads a Parquet file or directory. It is used by one run at a time.
type Source struct {
	path      string
	id        string
	maxRecord int64
	st        *stream
	// cols are the columns of the last pass that ended without a record
	// read: nil when not known (Columns).
	cols []string
	// hashed counts the bytes put through the prefix digest (see tests).
	hashed int64
}

var (
	_ source.Source   = (*Source)(nil)
	_ source.Columner = (*Source)(nil)
)

// New returns a Source over p.Path. Nothing is opened until ReadPage, so a
// missing path is reported there (wrapping source.ErrUnavailable).
func New(p Params) (*Source, error) {
	if p.Path == "" {
		return nil, fmt.Errorf("parquet source: empty path: %w", source.ErrInvalid)
	}
	abs, err := filepath.Abs(p.Path)
	if err != nil {
		return nil, fmt.Errorf("parquet source: %w", err)
	}
	m := p.MaxRecordBytes
	if m <= 0 {
		m = DefaultMaxRecordBytes
	}
	return &Source{path: abs, id: "parquet:" + abs, maxRecord: m}, nil
}

// Columns implements source.Columner: after a pass from the start that
// read no record, the columns of the last file read (its schema's and its
// directories' partition columns), or none when the path holds no file (an
// export directory left empty: the run fails instead of succeeding with
// nothing, run after run, where the dead-man check would never see it).
func (s *Source) Columns() []string { return s.cols }

// columnNames are the columns of the open file, or none without one.
func (st *stream) columnNames() []string {
	out := []string{}
	if st.cols == nil {
		return out
	}
	for _, f := range st.cols.fields {
		out = append(out, f.name)
	}
	for _, p := range st.cols.parts {
		out = append(out, p.name)
	}
	return out
}

// ID returns "parquet:" followed by the cleaned absolute path.
func (s *Source) ID() string { return s.id }

// listing is the files of the source, in the order they are read.
type listing struct {
	dir   string
	names []string
	// base is the name of the configured file or directory.
	base string
}

func (l listing) path(name string) string { return filepath.Join(l.dir, filepath.FromSlash(name)) }

// list finds the files: the path itself, or the directory's *.parquet files
// (and complete Parquet files of other names) and those of its
// subdirectories (partitions, as Spark, Hive, Redshift and
// DuckDB write them: dt=2026-12-01/), by their slash-separated paths in it,
// sorted. Hidden names are left out as Spark's reader leaves them out: "."
// first, or "_" first without "=" (files and directories being written,
// _temporary, _SUCCESS, .crc), see docs/config.md#parquet-source.
func (s *Source) list(ctx context.Context) (l listing, err error) {
	// The whole listing is one call given up when ctx ends: on a mount
	// that stopped answering, a stat or a directory read blocks in the
	// kernel (source.File).
	if werr := source.Within(ctx, func() { l, err = s.listNow() }); werr != nil {
		return listing{}, fmt.Errorf("%s: %w: list the files: %w", s.id, source.ErrUnavailable, werr)
	}
	return l, err
}

func (s *Source) listNow() (listing, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return listing{}, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	if !fi.IsDir() {
		return listing{dir: filepath.Dir(s.path), names: []string{filepath.Base(s.path)}, base: filepath.Base(s.path)}, nil
	}
	// A directory reached through a symbolic link (current -> the newest
	// export, as exports are often swapped) is walked where it points:
	// WalkDir does not follow a link at its root, and found no file there,
	// so such a sync succeeded with nothing, run after run (an independent
	// check, 2026-12-06). Resolved once, a pass reads one export even if
	// the link is swapped meanwhile.
	root, err := filepath.EvalSymlinks(s.path)
	if err != nil {
		return listing{}, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	l := listing{dir: root, base: filepath.Base(s.path)}
	// Links inside the export are followed too: a partition directory
	// linked in (dt=2026-12-06 -> ../other) was skipped by WalkDir, and its
	// rows never read, the run succeeding (an independent check,
	// 2026-12-06). A directory reached twice (a cycle) is read once.
	seen := map[string]bool{root: true}
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			n := e.Name()
			if hidden(n) {
				continue
			}
			p, r := filepath.Join(dir, n), path.Join(rel, n)
			isDir := e.IsDir()
			if e.Type()&fs.ModeSymlink != 0 {
				fi, err := os.Stat(p)
				if err != nil {
					continue // a link to nothing: nothing to read
				}
				isDir = fi.IsDir()
			}
			if isDir {
				real, err := filepath.EvalSymlinks(p)
				if err != nil {
					return err
				}
				if seen[real] {
					continue
				}
				seen[real] = true
				if err := walk(p, r); err != nil {
					return err
				}
				continue
			}
			if leftover(n) || (!strings.HasSuffix(strings.ToLower(n), ".parquet") && !complete(p)) {
				continue
			}
			l.names = append(l.names, r)
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return listing{}, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	slices.Sort(l.names)
	return l, nil
}

// complete says whether the file at p starts and ends with Parquet's magic
// bytes: a file named otherwise (Hive's 000000_0, Impala's .parq, a
// BigQuery export's 000000000000) whose writer has finished it. One still
// being written has no footer yet, so it is left out, not misread.
//
// A file that is not a regular one (a FIFO, a socket, a device) is not
// opened: the open of a FIFO without a writer blocks until one comes.
func complete(p string) bool {
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || fi.Size() < 12 {
		return false
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < 12 {
		return false
	}
	var head, tail [4]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return false
	}
	if _, err := f.ReadAt(tail[:], fi.Size()-4); err != nil {
		return false
	}
	return string(head[:]) == "PAR1" && string(tail[:]) == "PAR1"
}

// leftover says whether a file's name is a copy left beside an export (a
// backup, an editor's or a copy tool's): read as a file of the export, its
// rows, sorted after the file's own, won with their old values (an
// independent check, 2026-12-06).
func leftover(name string) bool {
	n := strings.ToLower(name)
	if strings.Contains(n, ".parquet.") {
		return true // part-0.parquet.1, .prev, .20261205: a copy of a file
	}
	for _, suffix := range []string{".bak", ".backup", ".old", ".orig", ".tmp", ".temp", ".swp", ".part", ".partial", ".crdownload", "~"} {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return false
}

// hidden says whether Spark's reader leaves a file or directory out.
func hidden(name string) bool {
	return strings.HasPrefix(name, ".") || (strings.HasPrefix(name, "_") && !strings.Contains(name, "="))
}

// partitions are the columns the directories of a file's path name
// (dt=2026-12-01/region=eu/part-0.parquet), values unescaped as Hive
// escapes them; Hive's default partition is null.
func partitions(name string) []partition {
	dirs := strings.Split(name, "/")
	var out []partition
	for _, d := range dirs[:len(dirs)-1] {
		k, v, ok := strings.Cut(d, "=")
		if !ok || k == "" {
			continue
		}
		p := partition{name: k}
		if v != "__HIVE_DEFAULT_PARTITION__" {
			if u, err := url.PathUnescape(v); err == nil {
				v = u
			}
			p.value = v
		}
		out = append(out, p)
	}
	return out
}

// chain extends the prefix digest prev with one file: its name and the
// SHA-256 of its content.
func chain(prev [sha256.Size]byte, name string, content []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(prev[:])
	fmt.Fprintf(h, "%d:%s", len(name), name)
	h.Write(content)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// hashFile returns the SHA-256 of f's content.
// Its reads end with f's context.
func (s *Source) hashFile(f *source.File) ([]byte, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62))
	s.hashed += n
	if err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

var _ source.Snapshotter = (*Source)(nil)

// Snapshot is the digest of every file's name and content:
// {"sha256": hex}.
func (s *Source) Snapshot(ctx context.Context) (map[string]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	var sum [sha256.Size]byte
	for _, name := range l.names {
		f, err := source.OpenFile(ctx, l.path(name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
		}
		content, err := s.hashFile(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: read %s for its snapshot: %w: %w", s.id, name, source.ErrUnavailable, err)
		}
		sum = chain(sum, name, content)
	}
	return map[string]any{"sha256": fmt.Sprintf("%x", sum)}, nil
}

// footerRows is the number of rows a file's footer declares, given up
// when ctx ends first.
func (s *Source) footerRows(ctx context.Context, path string) (n int64, err error) {
	if werr := source.Within(ctx, func() { n, err = s.footerRowsNow(path) }); werr != nil {
		return 0, fmt.Errorf("%s: %w: read the footer of %s: %w", s.id, source.ErrUnavailable, filepath.Base(path), werr)
	}
	return n, err
}

func (s *Source) footerRowsNow(path string) (n int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %w: the footer of %s could not be decoded (a damaged file?)", s.id, source.ErrInvalid, filepath.Base(path))
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	pf, err := openParquet(f, fi.Size())
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w", s.id, filepath.Base(path), err)
	}
	return pf.NumRows(), nil
}

func openParquet(f io.ReaderAt, size int64) (*pq.File, error) {
	pf, err := pq.OpenFile(f, size, pq.SkipPageIndex(true), pq.SkipBloomFilters(true))
	if err != nil {
		// parquet-go's message may quote the file's first or last bytes.
		return nil, fmt.Errorf("%w: not a Parquet file, or its footer is damaged or not written yet (a file still being written?)", source.ErrInvalid)
	}
	return pf, nil
}

// Close closes the open file, if any. The Source may be used again after.
func (s *Source) Close() error {
	if s.st == nil {
		return nil
	}
	err := s.st.closeFile()
	s.st = nil
	return err
}

// stream reads the source's files in order from one position onwards.
type stream struct {
	src *Source
	l   listing
	// idx is the file being read; sum the prefix digest through it.
	idx int
	sum [sha256.Size]byte
	// recno counts the records before the next one.
	recno int64
	// next is the Next of the last page returned: a ReadPage at it continues
	// the stream without hashing again.
	next string
	// err is an error met looking ahead past the last page, for the next.
	err error

	// ctx is the current page's: the file's calls end with it.
	ctx context.Context

	// The open file (nil between files).
	f     *source.File
	fi    fs.FileInfo
	pf    *pq.File
	cols  *columns
	rg    int     // row group being read
	rows  pq.Rows // its rows, nil before the first read
	row   int64   // rows of the file before the next one
	buf   []pq.Row
	ready []pq.Row // decoded rows not taken yet (a window of buf)
}

func (st *stream) closeFile() error {
	var err error
	if st.rows != nil {
		err = st.rows.Close()
		st.rows = nil
	}
	if st.f != nil {
		if cerr := st.f.Close(); err == nil {
			err = cerr
		}
		st.f = nil
	}
	st.pf, st.cols, st.ready = nil, nil, nil
	return err
}

func (st *stream) name() string { return st.l.names[st.idx] }

// use makes the stream's calls on its files end with ctx, a page's.
func (st *stream) use(ctx context.Context) *stream {
	st.ctx = ctx
	if st.f != nil {
		st.f.Use(ctx)
	}
	return st
}

// position is the cursor of the next row.
func (st *stream) position() position {
	p := position{file: st.name(), row: st.row, recno: st.recno}
	copy(p.sum[:], st.sum[:])
	return p
}

// ReadPage reads up to size records at cursor ("" is the start).
//
// Errors wrap source.ErrBadCursor (cursor cannot be decoded),
// source.ErrChanged (a file up to the cursor's is not the one the cursor was
// made from, or is gone), source.ErrInvalid (not Parquet, or a record larger
// than the limit), source.ErrUnavailable (a file cannot be opened or read)
// or the context's error.
func (s *Source) ReadPage(ctx context.Context, cursor string, size int) (page source.Page, err error) {
	defer s.recoverDamaged(&err)
	if size < 1 {
		return source.Page{}, fmt.Errorf("%s: page size %d: must be at least 1", s.id, size)
	}
	if err := ctx.Err(); err != nil {
		return source.Page{}, err
	}
	s.cols = nil
	if s.st == nil || cursor == "" || cursor != s.st.next {
		var pos *position
		if cursor != "" {
			p, err := parseCursor(cursor)
			if err != nil {
				return source.Page{}, fmt.Errorf("%s: %w", s.id, err)
			}
			pos = &p
		}
		_ = s.Close()
		st, err := s.open(ctx, pos)
		if err != nil {
			return source.Page{}, err
		}
		s.st = st
	} else if err := s.st.use(ctx).unchanged(); err != nil {
		_ = s.Close()
		return source.Page{}, err
	}
	page, err = s.fill(ctx, cursor, size)
	if err != nil || page.End {
		_ = s.Close()
	}
	if err != nil {
		return source.Page{}, err
	}
	return page, nil
}

// recoverDamaged turns a panic of parquet-go on a damaged file into an
// error of the file being read (parquet-go checks some of what it decodes
// by panicking); the stream is dropped, so a retry opens it again. The
// panic's value is left out: it may hold decoded bytes.
func (s *Source) recoverDamaged(err *error) {
	r := recover()
	if r == nil {
		return
	}
	where := "a file"
	if s.st != nil && s.st.f != nil {
		where = s.st.name()
		if s.st.pf != nil {
			// Its pages, read after its footer, are those of a file
			// written over meanwhile: not damage, a change.
			if cerr := s.st.unchanged(); errors.Is(cerr, source.ErrChanged) {
				_ = s.Close()
				*err = cerr
				return
			}
		}
	}
	_ = s.Close()
	*err = fmt.Errorf("%s: %w: %s could not be decoded (a damaged file?)", s.id, source.ErrInvalid, where)
}

// unchanged catches the open file replaced or rewritten since it was
// opened (its stat was taken before its content was hashed): checked
// before a page goes on with the file, when a page has gone past it and
// when a page is done, so that no page holds rows read from a file that
// was written over while the page was read.
func (st *stream) unchanged() error {
	if st.f == nil {
		return nil
	}
	fi, err := source.Stat(st.ctx, st.l.path(st.name()))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w: %s is gone", st.src.id, source.ErrChanged, st.name())
		}
		return fmt.Errorf("%s: %w: %w", st.src.id, source.ErrUnavailable, err)
	}
	if !os.SameFile(fi, st.fi) || fi.Size() != st.fi.Size() || !fi.ModTime().Equal(st.fi.ModTime()) {
		return fmt.Errorf("%s: %w: %s changed while it was read", st.src.id, source.ErrChanged, st.name())
	}
	return nil
}

func (s *Source) fill(ctx context.Context, cursor string, size int) (source.Page, error) {
	st := s.st
	if st.err != nil {
		return source.Page{}, st.err
	}
	page := source.Page{Cursor: cursor, Records: make([]source.Record, 0, min(size, 4096))}
	for len(page.Records) < size {
		if err := ctx.Err(); err != nil {
			return source.Page{}, err
		}
		ok, err := st.more(ctx)
		if err != nil {
			return source.Page{}, err
		}
		if !ok {
			page.End = true
			if err := st.unchanged(); err != nil {
				return source.Page{}, err
			}
			if cursor == "" && len(page.Records) == 0 {
				s.cols = st.columnNames()
			}
			return page, nil
		}
		fields, err := st.take()
		if err != nil {
			return source.Page{}, err
		}
		page.Records = append(page.Records, source.Record{Fields: fields})
	}
	page.Next = st.position().String()
	st.next = page.Next
	// Look one row ahead so the last page, not an empty one after it, ends
	// the source. A file past this page that cannot be read fails the next
	// page, not this one.
	ok, err := st.more(ctx)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, source.ErrChanged) {
			// A file of this page written over while it was read (the
			// look-ahead went past it) fails the page, as below.
			return source.Page{}, err
		}
		st.err = err
		return page, nil
	}
	if !ok {
		page.End = true
		page.Next = ""
	}
	// The page's rows were read from the files as they were hashed only if
	// the file read last was not written over meanwhile (those read before
	// it were checked when the page went past them): a file written in
	// place (pandas' to_parquet, pyarrow, DuckDB's COPY) gave rows of the
	// old file and, through the footer read before the write, pages of the
	// new one, and the last page ended the pass as if the file had been
	// read.
	if err := st.unchanged(); err != nil {
		return source.Page{}, err
	}
	return page, nil
}

// open lists the files and positions a stream at pos (nil: the start),
// checking the digest of the files up to pos's.
func (s *Source) open(ctx context.Context, pos *position) (*stream, error) {
	l, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	st := &stream{src: s, l: l, ctx: ctx, buf: make([]pq.Row, batch)}
	if pos == nil {
		if len(l.names) > 0 {
			if err := st.openFile(ctx, 0, nil); err != nil {
				_ = st.closeFile()
				return nil, err
			}
		}
		return st, nil
	}
	at := slices.Index(l.names, pos.file)
	if at < 0 {
		return nil, fmt.Errorf("%s: %w: %s, the file the saved position is in, is gone", s.id, source.ErrChanged, pos.file)
	}
	// The files before the cursor's: hashed, not read.
	for i := range at {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := source.OpenFile(ctx, l.path(l.names[i]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
		}
		content, err := s.hashFile(f)
		_ = f.Close()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
		}
		st.sum = chain(st.sum, l.names[i], content)
	}
	if err := st.openFile(ctx, at, &pos.sum); err != nil {
		_ = st.closeFile()
		return nil, err
	}
	if pos.row > st.pf.NumRows() {
		_ = st.closeFile()
		return nil, fmt.Errorf("%s: %w: %s has fewer rows than the saved position", s.id, source.ErrChanged, pos.file)
	}
	if err := st.seek(pos.row); err != nil {
		_ = st.closeFile()
		return nil, err
	}
	st.recno = pos.recno
	return st, nil
}

func equalPrefix(sum [sha256.Size]byte, want [sumLen]byte) bool {
	return [sumLen]byte(sum[:sumLen]) == want
}

// openFile opens file i, hashes it into the prefix digest (which must
// then be want, when given: a cursor's) and reads its footer.
func (st *stream) openFile(ctx context.Context, i int, want *[sumLen]byte) error {
	s := st.src
	st.idx, st.row, st.rg = i, 0, 0
	path := st.l.path(st.name())
	f, err := source.OpenFile(ctx, path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w: %s is gone", s.id, source.ErrChanged, st.name())
		}
		return fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	st.f = f
	if st.fi, err = f.Stat(); err != nil {
		return fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	content, err := s.hashFile(f)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s: %w: %w", s.id, source.ErrUnavailable, err)
	}
	st.sum = chain(st.sum, st.name(), content)
	if want != nil && !equalPrefix(st.sum, *want) {
		return fmt.Errorf("%s: %w: the files up to %s differ from those the saved position was taken in", s.id, source.ErrChanged, st.name())
	}
	if st.pf, err = openParquet(f, st.fi.Size()); err != nil {
		return fmt.Errorf("%s: %s: %w", s.id, st.name(), err)
	}
	st.cols = newColumns(st.pf.Schema(), partitions(st.name()))
	return nil
}

// seek positions the open file at row n.
func (st *stream) seek(n int64) error {
	groups := st.pf.RowGroups()
	var start int64
	for st.rg = 0; st.rg < len(groups); st.rg++ {
		if n < start+groups[st.rg].NumRows() {
			break
		}
		start += groups[st.rg].NumRows()
	}
	st.row = n
	if st.rg == len(groups) {
		return nil
	}
	st.rows = groups[st.rg].Rows()
	if err := st.rows.SeekToRow(n - start); err != nil {
		return st.decodeError(err)
	}
	return nil
}

// more makes sure a row is ready to take, moving on through row groups and
// files; false at the end of the last file.
func (st *stream) more(ctx context.Context) (bool, error) {
	for len(st.ready) == 0 {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if st.f == nil {
			return false, nil // no files
		}
		groups := st.pf.RowGroups()
		if st.rg >= len(groups) {
			if st.idx+1 >= len(st.l.names) {
				return false, nil
			}
			// Next was taken before this look-ahead: "after the last row
			// of this file" and "before the first of the next" are one
			// place. On an error ReadPage closes the stream. The file's
			// rows this page read are checked before the file is left.
			if err := st.unchanged(); err != nil {
				return false, err
			}
			if err := st.closeFile(); err != nil {
				return false, fmt.Errorf("%s: %w: %w", st.src.id, source.ErrUnavailable, err)
			}
			if err := st.openFile(ctx, st.idx+1, nil); err != nil {
				return false, err
			}
			continue
		}
		if st.rows == nil {
			st.rows = groups[st.rg].Rows()
		}
		n, err := st.rows.ReadRows(st.buf)
		st.ready = st.buf[:n]
		if err == io.EOF || (n == 0 && err == nil) {
			_ = st.rows.Close()
			st.rows = nil
			st.rg++
			continue
		}
		if err != nil {
			return false, st.decodeError(err)
		}
	}
	return true, nil
}

// take decodes the next ready row into a record.
func (st *stream) take() (map[string]any, error) {
	r := st.ready[0]
	st.ready = st.ready[1:]
	if n := rowSize(r); n > st.src.maxRecord {
		return nil, fmt.Errorf("%s: %w: row %d of %s (record %d): %d bytes is larger than max_record_bytes (%d)",
			st.src.id, source.ErrInvalid, st.row+1, st.name(), st.recno+1, n, st.src.maxRecord)
	}
	fields, err := st.cols.record(r)
	if err != nil {
		if cerr := st.unchanged(); errors.Is(cerr, source.ErrChanged) {
			return nil, cerr
		}
		return nil, fmt.Errorf("%s: %w: row %d of %s: %w", st.src.id, source.ErrInvalid, st.row+1, st.name(), err)
	}
	st.row++
	st.recno++
	return fields, nil
}

// decodeError wraps an error of parquet-go reading the open file's pages:
// the file's change when it was written over since it was opened (a page
// checksum that does not match, a page header where the footer read before
// the write says one starts), not damage.
func (st *stream) decodeError(err error) error {
	if st.ctx.Err() != nil {
		// A read given up (source.File): the file did not answer.
		return fmt.Errorf("%s: %w: %w", st.src.id, source.ErrUnavailable, err)
	}
	if cerr := st.unchanged(); errors.Is(cerr, source.ErrChanged) {
		return cerr
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w: %w", st.src.id, source.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w: %s, row group %d: %w", st.src.id, source.ErrInvalid, st.name(), st.rg, err)
}
