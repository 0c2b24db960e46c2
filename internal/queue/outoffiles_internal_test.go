package queue

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
)

// TestBuildFailureAtTheOpenFilesLimit: a sync that cannot be assembled
// because the process has no file descriptor left (a Parquet file, a
// database pool) is too_many_open_files, retried and the operator's; until
// 2026-12-05 it was invalid_sync_definition, not retried and counted by the
// breaker against the sync. A definition that does not build stays
// invalid_sync_definition.
func TestBuildFailureAtTheOpenFilesLimit(t *testing.T) {
	t.Parallel()
	emfile := fmt.Errorf("parquet source: %w", &os.PathError{Op: "open", Path: "/data/x.parquet", Err: syscall.EMFILE})
	for _, tc := range []struct {
		err  error
		want failure.Code
	}{
		{emfile, failure.TooManyOpenFiles},
		{failure.Wrap(failure.SourceUnavailable, emfile, "%s", emfile.Error()), failure.TooManyOpenFiles},
		{errors.New("unknown column"), failure.InvalidSyncDefinition},
	} {
		err := buildFailure(tc.err)
		if got := failure.CodeOf(err); got != tc.want {
			t.Errorf("%v: code %s, want %s", tc.err, got, tc.want)
		}
		if tc.want == failure.TooManyOpenFiles && !failure.Retryable(err) {
			t.Errorf("%v: not retried", tc.err)
		}
	}
}
