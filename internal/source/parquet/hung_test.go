package parquet_test

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/parquet"
)

// TestHungFileEndsWithTheTimeout: a file of the export whose open does not
// return (a FIFO without a writer, standing for a file on a network or FUSE
// mount that stopped answering, where the call blocks in the kernel) ends
// with the page's context, as source.ReadWithin gives it source.timeout:
// the run fails unavailable, naming the limit. Before, the read held the
// run, and its lease, for as long as the mount hung. A FIFO (or any file
// that is not a regular one) named otherwise than *.parquet is not an
// export's file: it is left out, not opened.
func TestHungFileEndsWithTheTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fifo string
		wantErr    bool
	}{
		{"a hung .parquet file", "part-1.parquet", true},
		{"a FIFO of another name", "000000_1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeParts(t, dir, map[string][]contact{"part-0.parquet": people(1, 5, "Ann")})
			if err := syscall.Mkfifo(filepath.Join(dir, tc.fifo), 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			src, err := parquet.New(parquet.Params{Path: dir})
			if err != nil {
				t.Fatal(err)
			}
			const limit = 200 * time.Millisecond
			done := make(chan error, 1)
			var n int
			go func() {
				done <- source.ReadWithin(t.Context(), nil, limit, src.ID(), "read a page", func(ctx context.Context) error {
					page, err := src.ReadPage(ctx, "", 100)
					n = len(page.Records)
					return err
				})
			}()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("ReadPage did not return 20 s after its 200ms source.timeout")
			}
			_ = src.Close()
			if !tc.wantErr {
				if err != nil || n != 5 {
					t.Fatalf("read %d records, err %v; want the 5 of part-0.parquet", n, err)
				}
				return
			}
			var na *source.NoAnswerError
			if !errors.As(err, &na) || !errors.Is(err, source.ErrUnavailable) || na.After != limit {
				t.Fatalf("err %v, want a *source.NoAnswerError after %v", err, limit)
			}
		})
	}
}
