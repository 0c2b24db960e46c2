package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

// TestCursorInWords: a saved cursor as status and the sync page show it,
// and Progress, the byte offset of the file's size, for the progress bar.
func TestCursorInWords(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "contacts.csv")
	var b strings.Builder
	b.WriteString("id,email\n")
	for range 3000 {
		b.WriteString("1,a@example.com\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := New(Params{Path: path, Format: CSV})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	page, err := src.ReadPage(context.Background(), "", 2000)
	if err != nil {
		t.Fatal(err)
	}
	c := &Config{Path: path}
	if got, want := c.DescribeCursor(&config.Source{}, page.Next), "after record 2,000 of contacts.csv"; !strings.HasPrefix(got, want) {
		t.Fatalf("DescribeCursor = %q, want %q...", got, want)
	}
	if got := c.DescribeCursor(&config.Source{}, ""); got != "start of contacts.csv" {
		t.Fatalf("empty cursor: %q", got)
	}
	pos, err := src.Progress(context.Background(), page.Next)
	if err != nil {
		t.Fatal(err)
	}
	if pos.Total != int64(b.Len()) || pos.Done != int64(len("id,email\n")+2000*len("1,a@example.com\n")) || !pos.InBytes {
		t.Fatalf("position %+v of a %d-byte file", pos, b.Len())
	}
}
