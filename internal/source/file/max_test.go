package file_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/file"
)

// TestMaxRecordBytes: a record past the limit fails the read as invalid
// data naming its line (not its content); one at the limit is read.
func TestMaxRecordBytes(t *testing.T) {
	t.Parallel()
	const max = 1024
	fits := strings.Repeat("a", max-10)
	big := "secret" + strings.Repeat("b", 3*max)
	for _, tc := range []struct {
		name   string
		format file.Format
		data   string
		line   int64 // 0: reads
	}{
		{"csv fits", file.CSV, "id,note\n1,x\n2," + fits + "\n3,y\n", 0},
		{"csv too long", file.CSV, "id,note\n1,x\n2," + big + "\n3,y\n", 3},
		{"csv too long quoted over lines", file.CSV, "id,note\n1,\"x\ny\"\n2,\"" + strings.ReplaceAll(big, "bb", "b\n") + "\"\n", 4},
		{"csv header too long", file.CSV, "id," + big + "\n1,x\n", 1},
		{"jsonl fits", file.JSONL, "{\"id\":1}\n{\"note\":\"" + fits + "\"}\n", 0},
		{"jsonl too long", file.JSONL, "{\"id\":1}\n\n{\"note\":\"" + big + "\"}\n{}\n", 3},
		{"jsonl too long last line", file.JSONL, "{\"id\":1}\n{\"note\":\"" + big + "\"}", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "data."+tc.format.String())
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			src, err := file.New(file.Params{Path: path, Format: tc.format, MaxRecordBytes: max})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			_, _, err = readAll(t, src, "", 1)
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("a record within the limit: %v", err)
				}
				return
			}
			var pe *file.ParseError
			if !errors.Is(err, source.ErrInvalid) || !errors.As(err, &pe) || pe.Line != tc.line {
				t.Fatalf("error %v; want a ParseError (source.ErrInvalid) on line %d", err, tc.line)
			}
			if msg := err.Error(); !strings.Contains(msg, "max_record_bytes") || strings.Contains(msg, "secret") {
				t.Fatalf("error %q: want max_record_bytes named and no content", msg)
			}
		})
	}
}

// TestHugeLineHeapBounded: a JSONL file whose second line is 40 MB is
// refused with the default limit (1 MiB) having held about that much:
// the peak heap, sampled while the read runs, stays far below the line.
func TestHugeLineHeapBounded(t *testing.T) {
	// Not parallel: it measures the process's heap.
	const lineBytes = 40 << 20
	path := filepath.Join(t.TempDir(), "huge.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString("{\"id\":1}\n{\"id\":2,\"note\":\"")
	chunk := strings.Repeat("x", 1<<16)
	for range lineBytes / len(chunk) {
		w.WriteString(chunk)
	}
	w.WriteString("\"}\n{\"id\":3}\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := file.New(file.Params{Path: path, Format: file.JSONL})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	page, err := src.ReadPage(context.Background(), "", 10)
	close(done)
	<-sampled
	runtime.ReadMemStats(&ms)
	peak.Store(max(peak.Load(), ms.HeapAlloc))
	var pe *file.ParseError
	if !errors.Is(err, source.ErrInvalid) || !errors.As(err, &pe) || pe.Line != 2 {
		t.Fatalf("ReadPage = %d records, %v; want a ParseError on line 2", len(page.Records), err)
	}
	grew := peak.Load() - min(base, peak.Load())
	t.Logf("a %d MB line refused; peak heap %d KB above the start (TotalAlloc %d MB)", lineBytes>>20, grew>>10, ms.TotalAlloc>>20)
	// The limit (1 MiB) held by the parser, the read buffer and the tap's
	// copy: a few MB. The line alone is 40.
	if grew > 8<<20 {
		t.Fatalf("peak heap grew %d KB reading past a %d MB line; want under 8 MB", grew>>10, lineBytes>>20)
	}
}
