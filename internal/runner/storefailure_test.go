package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestStoreFailureDiskFull: a full disk is store_unavailable (retried like
// an outage) whose detail says what to free; an outage's detail does not.
func TestStoreFailureDiskFull(t *testing.T) {
	t.Parallel()
	full := fmt.Errorf("sqlite ledger claim: %w: %w: database or disk is full (13)", store.ErrUnavailable, store.ErrDiskFull)
	down := fmt.Errorf("postgres ledger claim: %w: connection refused", store.ErrUnavailable)
	for _, tc := range []struct {
		name string
		err  error
		full bool
	}{
		{"claim, full", storeFailure(context.Background(), full, "claim the page's records"), true},
		{"lease, full", acquireFailure(full), true},
		{"claim, down", storeFailure(context.Background(), down, "claim the page's records"), false},
		{"lease, down", acquireFailure(down), false},
	} {
		if got := failure.CodeOf(tc.err); got != failure.StoreUnavailable {
			t.Errorf("%s: code %s, want store_unavailable", tc.name, got)
		}
		if got := strings.Contains(failure.Detail(tc.err), "disk is full; free space"); got != tc.full {
			t.Errorf("%s: detail %q; says the disk is full: %v, want %v", tc.name, failure.Detail(tc.err), got, tc.full)
		}
	}
}
