package cli

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oncesync/oncesync/internal/checkpoint"
	"github.com/oncesync/oncesync/internal/store/sqlite"
	"github.com/oncesync/oncesync/internal/web"
)

// TestWebDeadLetters: the sync page lists a sync's parked partition work,
// and re-queueing it starts a new run of the sync once.
func TestWebDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := st.AddDeadLetter(ctx, checkpoint.DeadLetter{SyncID: "s", RunID: 7, Partition: 2, Key: "k",
		Reason: checkpoint.ReasonSourceChanged, Attempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	var enqueued []string
	list, requeue := webDeadLetters(st, func(_ context.Context, syncID string) error {
		enqueued = append(enqueued, syncID)
		return nil
	})
	got, err := list(ctx, "s")
	if err != nil || len(got) != 1 || got[0].RunID != 7 || got[0].Partition != 2 || got[0].Code != checkpoint.ReasonSourceChanged {
		t.Fatalf("list: %+v %v", got, err)
	}
	if err := requeue(ctx, web.RequeueParams{SyncID: "s", ID: got[0].ID, By: "ada", Why: "source settled"}); err != nil {
		t.Fatal(err)
	}
	if len(enqueued) != 1 || enqueued[0] != "s" {
		t.Fatalf("enqueued %v", enqueued)
	}
	if after, _ := list(ctx, "s"); len(after) != 0 {
		t.Fatalf("a re-queued entry is still listed as parked: %+v", after)
	}
	if err := requeue(ctx, web.RequeueParams{SyncID: "s", ID: got[0].ID, By: "ada"}); err == nil {
		t.Fatal("re-queueing twice must fail")
	}
	_ = d
}
