package file

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/source"
)

// bufSize is the read buffer of a stream.
const bufSize = 64 << 10

// bom is the UTF-8 byte order mark, skipped at the start of a file.
var bom = []byte{0xEF, 0xBB, 0xBF}

// ParseError reports malformed data in a file. It names the line and what is
// wrong, never the line's content (it may hold personal data). It wraps
// source.ErrInvalid.
type ParseError struct {
	// Line is the 1-based line of the file where the problem is.
	Line int64
	// Reason says what is wrong, without quoting the data.
	Reason string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Unwrap returns source.ErrInvalid.
func (e *ParseError) Unwrap() error { return source.ErrInvalid }

// tap sits between the file and the parser's buffered reader. It keeps the
// bytes handed to the parser until they are hashed, so the running hash covers
// exactly the bytes before a record boundary however far the parser has read
// ahead.
type tap struct {
	r io.Reader
	h hash.Hash
	// buf[start:] holds the bytes at offsets base, base+1, ... that were handed
	// out but not hashed yet.
	buf   []byte
	start int
	base  int64
	// sum is the CRC-32C of the bytes read from offset since, the start of
	// the first record not consumed at the last check (see
	// Source.checkUnchanged): what the file must still hold there.
	sum   uint32
	since int64
	// hashed counts every byte hashed (tests check a pass hashes the file once).
	hashed *int64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (t *tap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		if t.start > 0 && len(t.buf)+n > cap(t.buf) {
			m := copy(t.buf, t.buf[t.start:])
			t.buf = t.buf[:m]
			t.start = 0
		}
		t.buf = append(t.buf, p[:n]...)
		t.sum = crc32.Update(t.sum, castagnoli, p[:n])
	}
	return n, err
}

// read returns where the bytes read since the last check begin, how many
// there are and their CRC-32C.
func (t *tap) read() (off, n int64, sum uint32) {
	return t.since, t.base + int64(len(t.buf)-t.start) - t.since, t.sum
}

// checked starts the next check's bytes at the first record not consumed.
func (t *tap) checked() {
	t.since = t.base
	t.sum = crc32.Checksum(t.buf[t.start:], castagnoli)
}

// advance hashes the bytes before offset to, which the parser has read.
func (t *tap) advance(to int64) {
	n := int(to - t.base)
	t.h.Write(t.buf[t.start : t.start+n])
	*t.hashed += int64(n)
	t.start += n
	t.base = to
	if t.start == len(t.buf) {
		t.buf = t.buf[:0]
		t.start = 0
	}
}

// errTooLong is what limiter returns once a record has run past the limit.
var errTooLong = errors.New("record larger than max_record_bytes")

// limiter sits between the tap and the parser's buffered reader and stops
// handing out bytes once the record being read has run past its limit, so a
// 40 MB line is refused having read about the limit (and the read buffer),
// never held whole by the parser or the tap.
type limiter struct {
	r io.Reader
	// off is the file offset of the next byte handed out; limit the offset
	// no byte may be read at (a record's start + max + its terminator).
	off, limit int64
	max        int64
	// eof is set once the file's end was read.
	eof bool
}

// bound starts a record at offset start.
func (l *limiter) bound(start int64) { l.limit = start + l.max + 2 }

func (l *limiter) Read(p []byte) (int, error) {
	if l.off >= l.limit {
		return 0, errTooLong
	}
	if int64(len(p)) > l.limit-l.off {
		p = p[:l.limit-l.off]
	}
	n, err := l.r.Read(p)
	l.off += int64(n)
	if err == io.EOF {
		l.eof = true
	}
	return n, err
}

// tooLong is the *ParseError of a record at line past the limit.
func tooLong(line, max int64) *ParseError {
	return &ParseError{Line: line, Reason: fmt.Sprintf("record is larger than max_record_bytes (%d bytes)", max)}
}

// notUTF8 says what to do about bytes that are not UTF-8: a file saved as
// Latin-1 or Windows-1252 (Excel's plain "CSV"). Read anyway, they would
// reach the destination as U+FFFD, a wrong value written without a word.
const notUTF8 = "is not UTF-8 text: save the file as UTF-8 (Excel: \"CSV UTF-8\"; iconv -f WINDOWS-1252 -t UTF-8)"

// loneSurrogateReason is why a JSONL record with an escaped lone UTF-16
// surrogate is rejected.
const loneSurrogateReason = `a string holds a lone UTF-16 surrogate escape (\ud800 to \udfff without its pair), which is no character: ` +
	"fix the program that wrote the file (it split a character such as an emoji in two)"

// loneSurrogate reports whether a JSON object line decoded into fields
// had an escaped lone surrogate ("\ud800"): encoding/json decodes one as
// U+FFFD, and the record would reach the destination with a character the
// source never held, as a file that is not UTF-8 would (notUTF8). Only a
// line with an escape and no U+FFFD of its own is looked into.
func loneSurrogate(text []byte, fields map[string]any) bool {
	if !bytes.Contains(text, []byte(`\u`)) || bytes.Contains(text, []byte("\uFFFD")) ||
		bytes.Contains(bytes.ToLower(text), []byte(`\ufffd`)) {
		return false
	}
	var holds func(v any) bool
	holds = func(v any) bool {
		switch x := v.(type) {
		case string:
			return strings.ContainsRune(x, utf8.RuneError)
		case map[string]any:
			for k, e := range x {
				if strings.ContainsRune(k, utf8.RuneError) || holds(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if holds(e) {
					return true
				}
			}
		}
		return false
	}
	return holds(any(fields))
}

// binaryKinds are the first bytes of files a user may give a csv or jsonl
// source by mistake, with what to do instead. Read as text they failed on
// their first line with a parser's words ("bare \" in non-quoted-field",
// "not a JSON object") that say nothing of the file's kind.
var binaryKinds = []struct {
	magic string
	what  string
}{
	{"\x1f\x8b", "is gzip-compressed: decompress it first (gunzip -k FILE) and point path at the result"},
	{"\xfd7zXZ\x00", "is xz-compressed: decompress it first (unxz -k FILE) and point path at the result"},
	{"\x28\xb5\x2f\xfd", "is zstd-compressed: decompress it first (unzstd FILE) and point path at the result"},
	{"PK\x03\x04", "is a ZIP archive (an Excel .xlsx workbook is one): save the sheet as CSV UTF-8, or unzip the archive"},
	{"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "is an Excel 97-2003 workbook (.xls): save the sheet as CSV UTF-8"},
	{"\xff\xfe", "is UTF-16 text (Excel's \"Unicode Text\"): save it as UTF-8 (Excel: \"CSV UTF-8\"; iconv -f UTF-16 -t UTF-8)"},
	{"\xfe\xff", "is UTF-16 text: save it as UTF-8 (iconv -f UTF-16 -t UTF-8)"},
}

// binaryKind says what a file starting with head (its first 10 bytes, or
// all of a shorter file) and ending with tail (its last 4) is and what to
// do, when it is one of binaryKinds, bzip2 or Parquet; "" otherwise. Those
// two are told by more than a prefix text could have (a CSV header may
// begin "BZh" or "PAR1").
func binaryKind(head, tail []byte) string {
	for _, k := range binaryKinds {
		if bytes.HasPrefix(head, []byte(k.magic)) {
			return k.what
		}
	}
	switch {
	case len(head) >= 10 && string(head[:3]) == "BZh" && head[3] >= '1' && head[3] <= '9' && string(head[4:10]) == "1AY&SY":
		return "is bzip2-compressed: decompress it first (bunzip2 -k FILE) and point path at the result"
	case bytes.HasPrefix(head, []byte("PAR1")) && len(head) >= 8 && string(tail) == "PAR1":
		return "is a Parquet file: give it to a source of type parquet"
	}
	return ""
}

// record is one parsed record and the offset just past it.
type record struct {
	fields map[string]any
	end    int64
	line   int64 // the record's first line
	// invalid, when set, says why this record cannot be read ("line 12:
	// ..."): the format lets the reader go on at the next one, so it is a
	// rejected record (source.Record.Invalid), not a failed read.
	invalid string
}

// parser reads records one at a time. next returns io.EOF at the end, a
// *ParseError for malformed data and any other error for a failed read.
type parser interface {
	next() (record, error)
}

// csvParser reads RFC 4180 records and maps them onto the header.
type csvParser struct {
	r      *csv.Reader
	header []string
	// base is the file offset where r starts reading; baseLine the line number
	// of that byte.
	base     int64
	baseLine int64
	// empty is set when the file has no header, so it has no records.
	empty bool
	// lim bounds each record; line is the line the next record starts at
	// (blank lines between records aside).
	lim  *limiter
	line int64
}

func newCSVReader(r io.Reader, comma rune) *csv.Reader {
	cr := csv.NewReader(r)
	cr.Comma = comma
	cr.FieldsPerRecord = -1 // checked against the header here, with our message
	cr.ReuseRecord = true
	return cr
}

// separator is the field separator of a CSV file whose first bytes are
// head (after any BOM): the header line's, outside quotes. Excel writes `;`
// where the decimal mark is a comma (most of Europe), and tab-separated
// exports are common; a header without a comma but with one of those is
// taken to use it. Every other file is comma-separated, as RFC 4180 says.
func separator(head []byte) rune {
	var commas, semis, tabs int
	quoted := false
scan:
	for _, c := range head {
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '\n' || c == '\r':
			break scan
		case c == ',':
			commas++
		case c == ';':
			semis++
		case c == '\t':
			tabs++
		}
	}
	switch {
	case commas == 0 && semis > 0:
		return ';'
	case commas == 0 && tabs > 0:
		return '\t'
	}
	return ','
}

// csvError turns an error of encoding/csv into a *ParseError or returns it;
// lim is the reader's limiter (nil when there is none) and line the line
// the record began at.
func csvError(err error, baseLine int64, lim *limiter, line int64) error {
	if errors.Is(err, errTooLong) && lim != nil {
		return tooLong(line, lim.max)
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		at := pe.Line
		if errors.Is(pe.Err, csv.ErrQuote) && lim != nil && lim.eof && pe.StartLine < pe.Line {
			// A quote never closed ran to the end of the file: encoding/csv
			// names the file's last line, the quote is in the record's first.
			at = pe.StartLine
		}
		// pe.Err is one of encoding/csv's fixed errors: it never quotes the data.
		return &ParseError{Line: baseLine + int64(at) - 1, Reason: pe.Err.Error()}
	}
	return err
}

// endLine is the last line of the record row whose first line is first:
// the line its last field starts at, plus the newlines in that field.
func endLine(r *csv.Reader, row []string, baseLine int64) int64 {
	if len(row) == 0 {
		return baseLine
	}
	rel, _ := r.FieldPos(len(row) - 1)
	return baseLine + int64(rel) - 1 + int64(strings.Count(row[len(row)-1], "\n"))
}

// readHeader reads and checks the header row. It returns io.EOF when the input
// has no rows at all; lim (nil when the reader has none) bounds it.
func readHeader(r *csv.Reader, baseLine int64, lim *limiter) ([]string, error) {
	row, err := r.Read()
	if err != nil {
		return nil, csvError(err, baseLine, lim, baseLine)
	}
	rel, _ := r.FieldPos(0)
	line := baseLine + int64(rel) - 1
	header := make([]string, len(row))
	seen := make(map[string]int, len(row))
	named := 0
	for i, name := range row {
		if strings.TrimSpace(name) == "" {
			// A column without a name (a trailing comma, a spreadsheet's
			// or pandas' unnamed index) is one no mapping can name: its
			// values are not read. It failed every run before.
			continue
		}
		named++
		if !utf8.ValidString(name) {
			return nil, &ParseError{Line: line, Reason: fmt.Sprintf("header column %d %s", i+1, notUTF8)}
		}
		if j, dup := seen[name]; dup {
			return nil, &ParseError{Line: line, Reason: fmt.Sprintf("header columns %d and %d have the same name", j+1, i+1)}
		}
		seen[name] = i
		header[i] = name
	}
	if named == 0 {
		return nil, &ParseError{Line: line, Reason: "the header has no column with a name"}
	}
	return header, nil
}

func (p *csvParser) next() (record, error) {
	if p.empty {
		return record{}, io.EOF
	}
	row, err := p.r.Read()
	if err != nil {
		return record{}, csvError(err, p.baseLine, p.lim, p.line)
	}
	end := p.base + p.r.InputOffset()
	p.lim.bound(end)
	p.line = endLine(p.r, row, p.baseLine) + 1
	if len(row) != len(p.header) {
		rel, _ := p.r.FieldPos(0)
		return record{end: end, invalid: fmt.Sprintf("line %d: the record has %d fields, the header has %d",
			p.baseLine+int64(rel)-1, len(row), len(p.header))}, nil
	}
	fields := make(map[string]any, len(row))
	for i, v := range row {
		if p.header[i] == "" {
			continue // an unnamed column (readHeader)
		}
		if !utf8.ValidString(v) {
			rel, _ := p.r.FieldPos(i)
			return record{end: end, invalid: fmt.Sprintf("line %d: column %q %s", p.baseLine+int64(rel)-1, p.header[i], notUTF8)}, nil
		}
		fields[p.header[i]] = v
	}
	rel, _ := p.r.FieldPos(0)
	return record{fields: fields, end: end, line: p.baseLine + int64(rel) - 1}, nil
}

// repeatedKeyReason is why a JSONL record whose object has a key twice is
// rejected.
const repeatedKeyReason = "the object has a key twice, so which value counts is unclear"

// topLevelMembers counts the members of the JSON object text (valid JSON,
// one object): the commas outside strings at depth one, plus one unless it
// is empty.
func topLevelMembers(text []byte) int {
	depth, commas, inString, empty := 0, 0, false, true
	for i := 0; i < len(text); i++ {
		c := text[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			if depth == 1 {
				empty = false
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 1 {
				commas++
			}
		}
	}
	if empty {
		return 0
	}
	return commas + 1
}

// jsonlParser reads one JSON object per line.
type jsonlParser struct {
	r *bufio.Reader
	// off is the file offset of the next byte of r; line the number of lines
	// read so far (including those before the start).
	off  int64
	line int64
	// long collects a line longer than r's buffer.
	long []byte
	// lim bounds each line.
	lim *limiter
	rd  bytes.Reader
}

// readLine returns the next line with its terminator, valid until the next
// call; io.EOF only when there is nothing left.
func (p *jsonlParser) readLine() ([]byte, error) {
	line, err := p.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		if err == io.EOF && len(line) > 0 {
			err = nil
		}
		return line, err
	}
	p.long = append(p.long[:0], line...)
	for {
		line, err = p.r.ReadSlice('\n')
		p.long = append(p.long, line...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil || err == io.EOF:
			return p.long, nil
		default:
			return nil, err
		}
	}
}

func (p *jsonlParser) next() (record, error) {
	for {
		line, err := p.readLine()
		if errors.Is(err, errTooLong) {
			return record{}, tooLong(p.line+1, p.lim.max)
		}
		if err != nil {
			return record{}, err
		}
		p.line++
		p.off += int64(len(line))
		p.lim.bound(p.off)
		text := bytes.Trim(line, " \t\r\n")
		if len(text) == 0 {
			continue // blank line
		}
		// A bad line is one record: the next line is the next record, so
		// it is rejected and the reading goes on.
		invalid := func() record { return record{end: p.off, invalid: fmt.Sprintf("line %d: not a JSON object", p.line)} }
		if text[0] != '{' {
			return invalid(), nil
		}
		if !utf8.Valid(text) {
			// encoding/json would decode the bytes as U+FFFD.
			return record{end: p.off, invalid: fmt.Sprintf("line %d: the line %s", p.line, notUTF8)}, nil
		}
		p.rd.Reset(text)
		dec := json.NewDecoder(&p.rd)
		dec.UseNumber()
		var fields map[string]any
		if err := dec.Decode(&fields); err != nil {
			// The decoder's message may quote the data: leave it out.
			return invalid(), nil
		}
		if _, err := dec.Token(); err != io.EOF {
			return record{end: p.off, invalid: fmt.Sprintf("line %d: more than one JSON value on the line", p.line)}, nil
		}
		if len(fields) != topLevelMembers(text) {
			// encoding/json keeps the last of a repeated key silently;
			// which one the producer meant is unknown (RFC 8259: names
			// should be unique), as for a CSV header repeated.
			return record{end: p.off, invalid: fmt.Sprintf("line %d: %s", p.line, repeatedKeyReason)}, nil
		}
		if loneSurrogate(text, fields) {
			return record{end: p.off, invalid: fmt.Sprintf("line %d: %s", p.line, loneSurrogateReason)}, nil
		}
		return record{fields: fields, end: p.off, line: p.line}, nil
	}
}
