package file_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/file"
)

// TestNotUTF8IsRejected: a record with bytes that are not UTF-8 (a file
// saved as Latin-1 or Windows-1252, as Excel's plain "CSV" does) is
// rejected, naming its line and saying to save the file as UTF-8. Read as
// it was, encoding/json turned "Zoë" into "Zo\uFFFD" on its way to the
// destination: a wrong value written, without a word.
func TestNotUTF8IsRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format file.Format
		data   string
		line   string // the rejected record's line
	}{
		{"csv", file.CSV, "id,name\r\n1,Ann\r\n2,Zo\xeb\r\n3,Cy\r\n", "line 3: "},
		{"csv quoted", file.CSV, "id,name\n1,Ann\n2,\"Zo\xeb,\n \"\"Z\"\"\"\n3,Cy\n", "line 3: "},
		{"jsonl", file.JSONL, "{\"id\":1,\"name\":\"Ann\"}\n{\"id\":2,\"name\":\"Zo\xeb\"}\n{\"id\":3,\"name\":\"Cy\"}\n", "line 2: "},
		{"jsonl key", file.JSONL, "{\"id\":1,\"name\":\"Ann\"}\n{\"id\":2,\"n\xe4me\":\"Zo\"}\n{\"id\":3,\"name\":\"Cy\"}\n", "line 2: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.format, tt.data)
			page, err := b.src.ReadPage(context.Background(), "", 10)
			if err != nil || len(page.Records) != 3 {
				t.Fatalf("ReadPage: %d records, %v; want 3", len(page.Records), err)
			}
			for i, r := range page.Records {
				if i == 1 {
					if !strings.HasPrefix(r.Invalid, tt.line) ||
						!strings.Contains(r.Invalid, "UTF-8") || strings.Contains(r.Invalid, "Zo") {
						t.Fatalf("record 2: Invalid %q, fields %q; want it rejected, naming its line and UTF-8, not its value", r.Invalid, r.Fields)
					}
					continue
				}
				if r.Invalid != "" {
					t.Fatalf("record %d: Invalid %q", i+1, r.Invalid)
				}
			}
		})
	}
}

// TestLoneSurrogateIsRejected: a JSONL string with an escaped lone UTF-16
// surrogate ("\ud800") decoded as U+FFFD and reached the destination so
// (an independent check, 2026-12-06), where the guide promises a record
// is rejected rather than sent with a character it never held. A pair
// (an escaped emoji), a U+FFFD of the file's own and an escaped backslash
// before a u are kept.
func TestLoneSurrogateIsRejected(t *testing.T) {
	t.Parallel()
	data := `{"id":1,"name":"Ann \ud83d\ude00"}` + "\n" +
		`{"id":2,"name":"Zo\ud800"}` + "\n" +
		`{"id":3,"tags":["a",{"x":"\udc00b"}]}` + "\n" +
		`{"id":4,"name":"\\ud800 and \ufffd"}` + "\n" +
		"{\"id\":5,\"name\":\"Cy \uFFFD\"}\n" +
		`{"id":6,"name":"\\ud800"}` + "\n"
	b := setup(t, file.JSONL, data)
	page, err := b.src.ReadPage(context.Background(), "", 10)
	if err != nil || len(page.Records) != 6 {
		t.Fatalf("ReadPage: %d records, %v; want 6", len(page.Records), err)
	}
	for i, want := range []string{"", "line 2: a string holds a lone UTF-16 surrogate", "line 3: a string holds a lone UTF-16 surrogate", "", "", ""} {
		r := page.Records[i]
		if (want == "") != (r.Invalid == "") || !strings.HasPrefix(r.Invalid, want) {
			t.Errorf("record %d: Invalid %q, want %q", i+1, r.Invalid, want)
		}
	}
	if got := page.Records[0].Fields["name"]; got != "Ann \U0001F600" {
		t.Errorf("record 1: name %q, want the emoji", got)
	}
}

// TestHeaderNotUTF8: a header that is not UTF-8 fails the read with a
// message that says to save the file as UTF-8.
func TestHeaderNotUTF8(t *testing.T) {
	t.Parallel()
	b := setup(t, file.CSV, "id,pr\xe9nom\n1,Ann\n")
	_, err := b.src.ReadPage(context.Background(), "", 10)
	if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "line 1: ") || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("ReadPage: %v; want an invalid-data error naming line 1 and UTF-8", err)
	}
}

// TestSemicolonSeparated: Excel in a locale whose decimal mark is a comma
// (most of Europe) saves "CSV" with `;` between fields, and tab-separated
// exports are common too. The header's separator is the file's: the
// fields come out by name, also when a run resumes mid-file. Read with a
// comma, the header was one column and every record failed with "the
// mapping names column "email", which the source does not have".
func TestSemicolonSeparated(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, data string }{
		{"semicolon", "\xef\xbb\xbfid;email;name\r\n1;a@x.io;\"Doe; Ann\"\r\n2;b@x.io;\"1,5 \"\"B\"\"\"\r\n3;c@x.io;Cy\r\n"},
		{"quoted header", "\"id\";\"email\";\"name\"\n1;a@x.io;\"Doe; Ann\"\n2;b@x.io;\"1,5 \"\"B\"\"\"\n3;c@x.io;Cy\n"},
		{"tab", "id\temail\tname\n1\ta@x.io\tDoe; Ann\n2\tb@x.io\t\"1,5 \"\"B\"\"\"\n3\tc@x.io\tCy\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, file.CSV, tt.data)
			want := rows(
				map[string]any{"id": "1", "email": "a@x.io", "name": "Doe; Ann"},
				map[string]any{"id": "2", "email": "b@x.io", "name": `1,5 "B"`},
				map[string]any{"id": "3", "email": "c@x.io", "name": "Cy"},
			)
			got, nexts := mustReadAll(t, b.src, "", 1)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("records %q, want %q", got, want)
			}
			rest, _ := mustReadAll(t, newSource(t, b.path, file.CSV), nexts[0], 1)
			if !reflect.DeepEqual(rest, want[1:]) {
				t.Fatalf("resumed: records %q, want %q", rest, want[1:])
			}
		})
	}
}

// TestCompressedOrBinaryFileIsNamed: a gzip-compressed export, an Excel
// workbook or a Parquet file given to a csv or jsonl source failed on its
// first line with the parser's words (`bare " in non-quoted-field`, `not a
// JSON object`). The read now names what the file is and what to do; a
// text file whose first bytes merely look like a magic number is read.
func TestCompressedOrBinaryFileIsNamed(t *testing.T) {
	t.Parallel()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("id,email\n1,a@x.io\n"))
	_ = zw.Close()
	var zipped bytes.Buffer
	aw := zip.NewWriter(&zipped)
	w, _ := aw.Create("xl/workbook.xml")
	_, _ = w.Write([]byte("<workbook/>"))
	_ = aw.Close()
	for _, tt := range []struct {
		name, data, want string
	}{
		{"gzip", gz.String(), "gzip-compressed"},
		{"xlsx", zipped.String(), "ZIP archive"},
		{"xls", "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + strings.Repeat("\x00", 64), "Excel 97-2003"},
		{"bzip2", "BZh91AY&SY" + strings.Repeat("\x01", 32), "bzip2-compressed"},
		{"parquet", "PAR1\x15\x04\x15\x10\x00\x00PAR1", "Parquet file"},
		{"utf-16", "\xff\xfei\x00d\x00\n\x00", "UTF-16"},
	} {
		for _, format := range []file.Format{file.CSV, file.JSONL} {
			t.Run(fmt.Sprintf("%s/%d", tt.name, format), func(t *testing.T) {
				t.Parallel()
				b := setup(t, format, tt.data)
				_, err := b.src.ReadPage(context.Background(), "", 10)
				if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "the file is") || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("ReadPage: %v; want an invalid-data error saying the file is %s", err, tt.want)
				}
			})
		}
	}
	// Text that begins like a magic number is text.
	for _, data := range []string{"PAR1,email\n1,a@x.io\n", "BZh,email\n1,a@x.io\n"} {
		b := setup(t, file.CSV, data)
		page, err := b.src.ReadPage(context.Background(), "", 10)
		if err != nil || len(page.Records) != 1 || page.Records[0].Invalid != "" {
			t.Fatalf("ReadPage of %q: %+v, %v; want its one record", data, page.Records, err)
		}
	}
}

// TestRepeatedKeyIsRejected: encoding/json keeps the last of a repeated
// key, so {"email":"a@x.io","email":"b@x.io"} went out as b@x.io without a
// word (CSV refuses a repeated header). Such a record is rejected by line;
// keys inside nested values, commas and braces inside strings, and escaped
// quotes do not count.
func TestRepeatedKeyIsRejected(t *testing.T) {
	t.Parallel()
	data := `{"id":1,"email":"a@x.io","email":"b@x.io"}` + "\n" +
		`{"id":2,"email":"c@x.io","tags":{"a":1,"b":[1,2,{"c":3}]},"note":"x, \"y\": {z}"}` + "\n" +
		`{}` + "\n" +
		`{"id":4,"id":4}` + "\n" +
		`{"id":5,"v":{"k":1,"k":2}}` + "\n"
	b := setup(t, file.JSONL, data)
	page, err := b.src.ReadPage(context.Background(), "", 10)
	if err != nil || len(page.Records) != 5 {
		t.Fatalf("ReadPage: %d records, %v; want 5", len(page.Records), err)
	}
	for i, want := range []string{"line 1: the object has a key twice", "", "", "line 4: the object has a key twice", ""} {
		r := page.Records[i]
		if (want == "") != (r.Invalid == "") || !strings.HasPrefix(r.Invalid, want) {
			t.Errorf("record %d: Invalid %q, want %q", i+1, r.Invalid, want)
		}
		if strings.Contains(r.Invalid, "@") {
			t.Errorf("record %d: the reason %q quotes a value", i+1, r.Invalid)
		}
	}
}
