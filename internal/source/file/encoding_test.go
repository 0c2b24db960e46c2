package file_test

import (
	"context"
	"errors"
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
