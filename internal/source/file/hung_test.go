package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/file"
)

// hungFile is a file whose reads block once what was written is read: a
// FIFO held open for writing, standing for a network filesystem whose
// server stopped answering (there a read blocks in the kernel, where no
// context reaches it).
func hungFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hung")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	w, err := os.OpenFile(path, os.O_RDWR, 0) // a writer that never writes more: reads block
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	if _, err := w.WriteString(content); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHungReadEndsWithTheTimeout: a read of the file that does not return
// ends with the page's context, as source.ReadWithin gives it
// source.timeout: the run fails unavailable, naming the limit. Before, the
// read held the run, and its lease, for as long as the mount hung.
func TestHungReadEndsWithTheTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		format  file.Format
		content string
	}{
		{"csv, nothing written", file.CSV, ""},
		{"jsonl, two records then nothing", file.JSONL, "{\"id\":1}\n{\"id\":2}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, err := file.New(file.Params{Path: hungFile(t, tc.content), Format: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			const limit = 200 * time.Millisecond
			done := make(chan error, 1)
			go func() {
				done <- source.ReadWithin(t.Context(), nil, limit, src.ID(), "read a page", func(ctx context.Context) error {
					_, err := src.ReadPage(ctx, "", 10)
					return err
				})
			}()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("ReadPage did not return 20 s after its 200ms source.timeout")
			}
			var na *source.NoAnswerError
			if !errors.As(err, &na) || !errors.Is(err, source.ErrUnavailable) || na.After != limit {
				t.Fatalf("err %v, want a *source.NoAnswerError after %v", err, limit)
			}
			if err := src.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
}
