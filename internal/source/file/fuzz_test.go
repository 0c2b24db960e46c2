package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/file"
)

func FuzzCursorDecode(f *testing.F) {
	for _, s := range []string{
		"", "f1:0:0:e3b0c44298fc1c149afbf4c8996fb924", "f1:18:2:0123456789abcdef0123456789abcdef",
		"f1:-1:0:00", "f1:01:0:0123456789abcdef0123456789abcdef", "f2:1:1:x", "f1:1:2:0123456789ABCDEF0123456789ABCDEF",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		roundTrips, err := file.CheckCursor(c)
		if err != nil {
			if !errors.Is(err, source.ErrBadCursor) {
				t.Fatalf("decode error %v does not wrap ErrBadCursor", err)
			}
			if strings.Contains(err.Error(), c) && len(c) > 8 {
				t.Fatalf("decode error %q repeats the cursor", err)
			}
			return
		}
		if !roundTrips {
			t.Fatalf("%q decodes but does not encode back to itself", c)
		}
	})
}

func FuzzCSVPaging(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,2\n3,4\n", "\ufeff\"a\",b\r\n\"x\ny\",\"q\"\"\"\r\n,\r\n", "a\n\n1\n\n2", "a,a\n1,2\n",
		"a,b\n1\n", "a\n\"unterminated\n", "a\nx\"y\n", "", "a,b\n1,2\n3,4\n5,6\n7,8\n9,10\n11,12\n",
	} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		fuzzPaging(t, file.CSV, data, int(size%16)+1)
	})
}

func FuzzJSONLPaging(f *testing.F) {
	for _, s := range []string{
		"{\"a\":1}\n{\"a\":\"x\"}\n", "\ufeff{}\r\n\r\n{\"n\":12345678901234567890}\r\n", "{}\n[]\n", "{}\n{\"a\":",
		"", "\n\n", "{\"a\":{\"b\":[1,2,{}]}}\n{\"c\":null}", "{}\n{}\n{}\n{}\n{}\n{}\n{}\n", "{}{}\n",
	} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		fuzzPaging(t, file.JSONL, data, int(size%16)+1)
	})
}

// pass is the outcome of reading to the end (or to an error).
type pass struct {
	recs    []map[string]any
	cursors []string // Next of every page but the last
	before  []int    // records before each of cursors
	err     error
}

// readPass reads from cursor, which has before records before it, to the end.
func readPass(t *testing.T, src *file.Source, cursor string, before, size int) pass {
	t.Helper()
	var p pass
	for range 1 << 20 {
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			if !errors.Is(err, source.ErrInvalid) {
				t.Fatalf("ReadPage: %v; want nil or ErrInvalid for any file content", err)
			}
			p.err = err
			return p
		}
		if page.Cursor != cursor || len(page.Records) > size {
			t.Fatalf("page at %q has Cursor %q and %d records (size %d)", cursor, page.Cursor, len(page.Records), size)
		}
		for _, r := range page.Records {
			p.recs = append(p.recs, r.Fields)
		}
		if page.End {
			if page.Next != "" {
				t.Fatalf("End page has Next %q", page.Next)
			}
			return p
		}
		if len(page.Records) != size {
			t.Fatalf("page without End has %d records, want %d", len(page.Records), size)
		}
		if ok, err := file.CheckCursor(page.Next); !ok || err != nil {
			t.Fatalf("Next %q does not decode: %v", page.Next, err)
		}
		if n, _ := file.CursorRecords(page.Next); n != int64(before+len(p.recs)) {
			t.Fatalf("Next %q counts %d records before it, want %d", page.Next, n, before+len(p.recs))
		}
		p.cursors = append(p.cursors, page.Next)
		p.before = append(p.before, len(p.recs))
		cursor = page.Next
	}
	t.Fatal("no End")
	return p
}

// checkPass checks that got, read with page size size, matches ref (read one
// record at a time) from record from on: the same records, or on malformed
// data the same error after the records of the pages before the bad one.
func checkPass(t *testing.T, what string, got, ref pass, from, size int) {
	t.Helper()
	want := ref.recs[from:]
	if (got.err == nil) != (ref.err == nil) {
		t.Fatalf("%s: error %v, one record at a time: %v", what, got.err, ref.err)
	}
	if ref.err != nil {
		want = want[:len(want)/size*size]
		if got.err.Error() != ref.err.Error() {
			t.Fatalf("%s: error %q, one record at a time: %q", what, got.err, ref.err)
		}
	}
	if len(got.recs) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got.recs, want) {
		t.Fatalf("%s: records\n got %#v\nwant %#v", what, got.recs, want)
	}
}

func fuzzPaging(t *testing.T, format file.Format, data []byte, size int) {
	path := filepath.Join(t.TempDir(), "fuzz."+format.String())
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	open := func() *file.Source {
		src, err := file.New(file.Params{Path: path, Format: format})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = src.Close() })
		return src
	}
	ref := readPass(t, open(), "", 0, 1)
	src := open()
	got := readPass(t, src, "", 0, size)
	checkPass(t, "one pass", got, ref, 0, size)
	// Every Next, or an even sample of 64 when there are more (keeps large
	// inputs from costing quadratic time).
	step := max(1, len(got.cursors)/64)
	for i := 0; i < len(got.cursors); i += step {
		c := got.cursors[i]
		rest := readPass(t, open(), c, got.before[i], size)
		checkPass(t, "resumed in a fresh source", rest, ref, got.before[i], size)
		if (i/step)%2 == 0 {
			// The first source jumping back.
			back := readPass(t, src, c, got.before[i], size)
			checkPass(t, "resumed in the same source", back, ref, got.before[i], size)
		}
	}
}
