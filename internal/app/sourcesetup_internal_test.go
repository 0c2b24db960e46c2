package app

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/source"
)

// TestSourceSetupFailure: a source's construction error maps to its code; a
// setup that ran out of time is the source's (source_unavailable, retried),
// not the definition's: "context deadline exceeded" was reported as
// invalid_sync_definition, owner you.
func TestSourceSetupFailure(t *testing.T) {
	t.Parallel()
	timedOut := fmt.Errorf("postgres:h:5432/db/t: check: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		err  error
		want failure.Code
	}{
		{fmt.Errorf("x: %w", source.ErrUnavailable), failure.SourceUnavailable},
		{fmt.Errorf("x: %w", source.ErrAuth), failure.SourceAuth},
		{fmt.Errorf("x: %w", source.ErrInvalid), failure.SourceQueryInvalid},
		{&source.NoAnswerError{Err: timedOut, After: 30 * time.Second, Hint: "a lock"}, failure.SourceUnavailable},
		{timedOut, failure.SourceUnavailable},
		{errors.New("table: want name or schema.name"), failure.InvalidSyncDefinition},
	} {
		if got := failure.CodeOf(sourceSetupFailure(tc.err)); got != tc.want {
			t.Errorf("sourceSetupFailure(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
