package sqlite

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// TestDiskFull: a write the file has no room for (SQLITE_FULL, here from
// max_page_count on the store's one write connection, as a full disk gives
// it) is refused as ErrUnavailable and ErrDiskFull, so the run can say what
// to free; other refusals are not ErrDiskFull.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := openTemp(t, clock.Real{})
	l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "t", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LedgerGet(ctx, "s", []string{"absent"}); errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("a read of a store with room: %v", err)
	}
	var pages int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+2)); err != nil {
		t.Fatal(err)
	}
	for page := 0; ; page++ {
		if page == 100 {
			t.Fatal("100 pages of claims fit in two more database pages: max_page_count did not apply")
		}
		keys := make([]string, 200)
		for i := range keys {
			keys[i] = fmt.Sprintf("%064x", page*1000+i)
		}
		err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s", Fence: l.Fence, RunID: 1, Keys: keys})
		if err == nil {
			continue
		}
		if !errors.Is(err, store.ErrDiskFull) || !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("claim into a full file: %v; want ErrDiskFull and ErrUnavailable", err)
		}
		break
	}
	if err := s.mapErr("x", store.ErrUnavailable); errors.Is(err, store.ErrDiskFull) {
		t.Fatalf("an outage read as a full disk: %v", err)
	}
}
