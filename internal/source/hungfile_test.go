package source_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/source"
)

// TestOpenOfAHungFileEnds: an open that does not return (a FIFO without a
// writer blocks in open(2), as a file on a hung network mount does) ends
// with its context; the file is closed once the open returns.
func TestOpenOfAHungFileEnds(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hung")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		f, err := source.OpenFile(ctx, path)
		if err == nil {
			_ = f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("open: %v, want the context's deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("OpenFile did not return 20 s after its context ended")
	}
	// A writer lets the open given up return; its file is then closed.
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()

	// Once a call was given up, the File fails every later call at once.
	w2, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	rctx, rcancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer rcancel()
	f, err := source.OpenFile(rctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 8)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read: %v, want the context's deadline", err)
	}
	f.Use(t.Context())
	if _, err := f.Stat(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stat after a read was given up: %v, want the first call's error", err)
	}
}
