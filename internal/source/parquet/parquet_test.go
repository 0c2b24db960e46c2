package parquet_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/parquet"
)

type typed struct {
	ID     int64      `parquet:"id"`
	Small  int32      `parquet:"small"`
	Score  float64    `parquet:"score"`
	Ratio  float32    `parquet:"ratio"`
	Active bool       `parquet:"active"`
	Nick   *string    `parquet:"nick,optional"`
	Seen   time.Time  `parquet:"seen,timestamp(millisecond)"`
	Local  int64      `parquet:"local,timestamp(microsecond)"`
	Born   int32      `parquet:"born,date"`
	Price  int64      `parquet:"price,decimal(2:18)"`
	Tags   []string   `parquet:"tags,list"`
	Raw    []byte     `parquet:"raw"`
	When   *time.Time `parquet:"when,optional,timestamp(nanosecond)"`
}

func open(t *testing.T, path string) *parquet.Source {
	t.Helper()
	src, err := parquet.New(parquet.Params{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// readAll reads src from cursor to its end in pages of size.
func readAll(t *testing.T, src source.Source, cursor string, size int) []source.Record {
	t.Helper()
	var out []source.Record
	for range 100000 {
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatalf("ReadPage: %v", err)
		}
		out = append(out, page.Records...)
		if page.End {
			return out
		}
		cursor = page.Next
	}
	t.Fatal("no end")
	return nil
}

// TestValues: every type maps to what the PostgreSQL source gives for its
// equivalent (int64, json.Number, bool, nil, RFC 3339 timestamps).
func TestValues(t *testing.T) {
	t.Parallel()
	nick := "Ada"
	seen := time.Date(2024, 5, 1, 10, 0, 0, 123e6, time.UTC)
	when := time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC)
	path := filepath.Join(t.TempDir(), "typed.parquet")
	writeRows(t, path, []typed{
		{ID: 9007199254740993, Small: -7, Score: 0.1, Ratio: 1.5, Active: true, Nick: &nick, Seen: seen,
			Local: time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC).UnixMicro(), Born: 19000, Price: -12345,
			Tags: []string{"a", "b"}, Raw: []byte{0xff, 0x00}, When: &when},
		{ID: 2, Tags: []string{}, Raw: []byte("text")},
	}, 10)
	got := readAll(t, open(t, path), "", 10)
	want := []map[string]any{{
		"id": int64(9007199254740993), "small": int64(-7), "score": json.Number("0.1"), "ratio": json.Number("1.5"),
		"active": true, "nick": "Ada", "seen": "2024-05-01T10:00:00.123Z", "local": "2024-01-02T03:04:05.000006Z",
		"born": "2022-01-08", "price": json.Number("-123.45"), "tags": []any{"a", "b"}, "raw": "/wA=",
		"when": "2024-05-01T10:00:00.123456789Z",
	}, {
		"id": int64(2), "small": int64(0), "score": json.Number("0"), "ratio": json.Number("0"),
		"active": false, "nick": nil, "seen": "0001-01-01T00:00:00Z", "local": "1970-01-01T00:00:00Z",
		"born": "1970-01-01", "price": json.Number("0.00"), "tags": []any{}, "raw": "text", "when": nil,
	}}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		for k, w := range want[i] {
			if g := got[i].Fields[k]; !reflect.DeepEqual(g, w) {
				t.Errorf("record %d: %s = %#v (%T), want %#v (%T)", i, k, g, g, w, w)
			}
		}
		if len(got[i].Fields) != len(want[i]) {
			t.Errorf("record %d: %d fields, want %d", i, len(got[i].Fields), len(want[i]))
		}
	}
}

// writeParts writes files name → rows (of contact) into dir.
func writeParts(t *testing.T, dir string, parts map[string][]contact) {
	t.Helper()
	for name, rows := range parts {
		writeRows(t, filepath.Join(dir, name), rows, 3)
	}
}

func people(from, to int, name string) []contact {
	var out []contact
	for i := from; i <= to; i++ {
		out = append(out, contact{ID: itoa(i), Email: "user" + itoa(i) + "@example.test", Name: name})
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func ids(recs []source.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Fields["id"].(string)
	}
	return out
}

// cursorAfter reads pages of size from the start and returns the Next of the
// first page whose records reach id, and the ids read.
func cursorAfter(t *testing.T, src source.Source, size int, id string) (string, []string) {
	t.Helper()
	cursor := ""
	var read []string
	for {
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, ids(page.Records)...)
		if page.End {
			t.Fatalf("no page reached id %s", id)
		}
		cursor = page.Next
		if read[len(read)-1] == id {
			return cursor, read
		}
	}
}

// TestDirectoryBetweenRuns: a run stopped in the second of three files
// resumes in a new process after a file was added at the end: the rest and
// the new file's rows are read, nothing twice. A file read before the
// cursor that was rewritten, a file inserted before it and the cursor's
// own file rewritten are source changes; the same reads at the start (a new
// run) succeed.
func TestDirectoryBetweenRuns(t *testing.T) {
	t.Parallel()
	setupDir := func(t *testing.T) string {
		dir := t.TempDir()
		writeParts(t, dir, map[string][]contact{
			"part-00000.parquet": people(1, 5, "A"),
			"part-00001.parquet": people(6, 12, "B"),
			"part-00002.parquet": people(13, 14, "C"),
		})
		return dir
	}
	t.Run("FileAdded", func(t *testing.T) {
		dir := setupDir(t)
		cursor, read := cursorAfter(t, open(t, dir), 4, "8")
		writeParts(t, dir, map[string][]contact{"part-00003.parquet": people(15, 17, "D")})
		rest := ids(readAll(t, open(t, dir), cursor, 4))
		all := append(read, rest...)
		want := ids(readAll(t, open(t, dir), "", 5))
		if !reflect.DeepEqual(all, want) || len(want) != 17 {
			t.Fatalf("read %v then %v after a file was added; a whole pass reads %v", read, rest, want)
		}
	})
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"ReadFileRewritten", func(t *testing.T, dir string) {
			writeParts(t, dir, map[string][]contact{"part-00000.parquet": people(1, 5, "a changed name")})
		}},
		{"FileInsertedBefore", func(t *testing.T, dir string) {
			writeParts(t, dir, map[string][]contact{"part-000005.parquet": people(100, 101, "X")})
		}},
		{"CursorFileRewritten", func(t *testing.T, dir string) {
			writeParts(t, dir, map[string][]contact{"part-00001.parquet": people(6, 12, "b changed")})
		}},
		{"CursorFileNoLongerParquet", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "part-00001.parquet"), []byte("id\n6\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"CursorFileGone", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "part-00001.parquet")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := setupDir(t)
			same := open(t, dir)
			cursor, _ := cursorAfter(t, same, 4, "8")
			tc.change(t, dir)
			// A new process at the saved cursor.
			if _, err := open(t, dir).ReadPage(context.Background(), cursor, 4); !errors.Is(err, source.ErrChanged) {
				t.Fatalf("resume after the change: %v; want source.ErrChanged", err)
			}
			if strings.Contains(tc.name, "Cursor") {
				// The same process, reading on.
				if _, err := same.ReadPage(context.Background(), cursor, 4); !errors.Is(err, source.ErrChanged) {
					t.Fatalf("the same source reading on: %v; want source.ErrChanged", err)
				}
			}
			if tc.name == "CursorFileNoLongerParquet" {
				return // a new pass fails on it too, as source_query_invalid
			}
			// The next run reads from the start: no error.
			if n := len(readAll(t, open(t, dir), "", 4)); n == 0 {
				t.Fatal("a new pass read nothing")
			}
		})
	}
}

// TestMaxRecordBytes: a row larger than the limit fails the read with
// source.ErrInvalid naming its row and file, never its values.
func TestMaxRecordBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := strings.Repeat("secret", 400) // 2,400 bytes
	rows := people(1, 6, "small")
	rows[4].Note = big
	writeRows(t, filepath.Join(dir, "part-0.parquet"), rows, 2)
	src, err := parquet.New(parquet.Params{Path: dir, MaxRecordBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	page, err := src.ReadPage(context.Background(), "", 3)
	if err != nil || len(page.Records) != 3 {
		t.Fatalf("first page: %d records, %v", len(page.Records), err)
	}
	_, err = src.ReadPage(context.Background(), page.Next, 3)
	if !errors.Is(err, source.ErrInvalid) {
		t.Fatalf("page with the large row: %v; want source.ErrInvalid", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "row 5 of part-0.parquet") || !strings.Contains(msg, "max_record_bytes") || strings.Contains(msg, "secret") {
		t.Fatalf("error %q: want row 5 of part-0.parquet and max_record_bytes named, no value", msg)
	}
	// Under the default limit it reads.
	if n := len(readAll(t, open(t, dir), "", 3)); n != 6 {
		t.Fatalf("default limit: %d records, want 6", n)
	}
}

// TestProgressAndDescribe: rows of the total from the footers.
func TestProgressAndDescribe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeParts(t, dir, map[string][]contact{"a.parquet": people(1, 5, "A"), "b.parquet": people(6, 12, "B")})
	src := open(t, dir)
	page, err := src.ReadPage(context.Background(), "", 7)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := src.Progress(context.Background(), page.Next)
	if err != nil {
		t.Fatal(err)
	}
	if pos.Done != 7 || pos.Total != 12 || pos.InBytes || pos.Where != "after row 2 of b.parquet (record 7 of "+filepath.Base(dir)+")" {
		t.Fatalf("Progress = %+v; want 7 of 12 rows, after row 2 of b.parquet", pos)
	}
	if got := parquet.Describe("x.parquet", ""); got != "start of x.parquet" {
		t.Fatalf("Describe start = %q", got)
	}
}

// TestNotParquet: a *.parquet file that is not Parquet fails the page that
// reaches it (source.ErrInvalid, without quoting its bytes); the pages
// before it are read.
func TestNotParquet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeParts(t, dir, map[string][]contact{"a.parquet": people(1, 4, "A")})
	if err := os.WriteFile(filepath.Join(dir, "b.parquet"), []byte("email,name\nann@example.test,Ann\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := open(t, dir)
	page, err := src.ReadPage(context.Background(), "", 4)
	if err != nil || len(page.Records) != 4 || page.End {
		t.Fatalf("first page: %d records, end %v, %v; want a.parquet's 4", len(page.Records), page.End, err)
	}
	_, err = src.ReadPage(context.Background(), page.Next, 4)
	if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "b.parquet") || strings.Contains(err.Error(), "ann") || strings.Contains(err.Error(), "emai") {
		t.Fatalf("page in b.parquet: %v; want source.ErrInvalid naming b.parquet, quoting nothing", err)
	}
}

// TestCursorInWords: a saved cursor as status and the sync page show it,
// through the config's CursorDescriber.
func TestCursorInWords(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "exports")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeParts(t, dir, map[string][]contact{"a.parquet": people(1, 3000, "A"), "b.parquet": people(3001, 3500, "B")})
	src := open(t, dir)
	page, err := src.ReadPage(context.Background(), "", 3200)
	if err != nil {
		t.Fatal(err)
	}
	var c config.CursorDescriber = &parquet.Config{Path: dir}
	if got, want := c.DescribeCursor(&config.Source{}, page.Next), "after row 200 of b.parquet (record 3,200 of exports)"; got != want {
		t.Fatalf("DescribeCursor = %q, want %q", got, want)
	}
	if got := c.DescribeCursor(&config.Source{}, ""); got != "start of exports" {
		t.Fatalf("empty cursor: %q", got)
	}
	if got := c.DescribeCursor(&config.Source{}, "garbage"); !strings.Contains(got, "cannot read") {
		t.Fatalf("bad cursor: %q", got)
	}
}
