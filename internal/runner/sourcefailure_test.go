package runner

import (
	"context"
	"fmt"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/source"
)

// TestSourceFailureCodes: each source sentinel maps to its code; a refused
// credential (a SaaS source's token) is source_auth, not retried.
func TestSourceFailureCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want failure.Code
	}{
		{source.ErrAuth, failure.SourceAuth},
		{source.ErrInvalid, failure.SourceQueryInvalid},
		{source.ErrBadCursor, failure.SourceQueryInvalid},
		{source.ErrChanged, failure.SourceChangedDuringRun},
		{source.ErrUnavailable, failure.SourceUnavailable},
	} {
		err := sourceFailure(context.Background(), fmt.Errorf("shopify:x: %w: detail", tc.err))
		if got := failure.CodeOf(err); got != tc.want {
			t.Errorf("%v: code %s, want %s", tc.err, got, tc.want)
		}
	}
	if failure.Retryable(sourceFailure(context.Background(), source.ErrAuth)) {
		t.Error("source_auth must not be retried")
	}
}
