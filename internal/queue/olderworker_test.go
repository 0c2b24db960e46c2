package queue

import (
	"context"
	"database/sql"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
)

// olderRunSyncArgs is RunSyncArgs as an oncesync from before "send
// everything again" (2026-12-04) decodes it: no resend fields.
type olderRunSyncArgs struct {
	SyncID string `json:"sync_id"`
	Reason string `json:"reason"`
}

func (olderRunSyncArgs) Kind() string { return KindRunSync }

type olderRunSyncWorker struct {
	river.WorkerDefaults[olderRunSyncArgs]
	worked chan<- string
}

func (w *olderRunSyncWorker) Work(_ context.Context, job *river.Job[olderRunSyncArgs]) error {
	w.worked <- job.Args.SyncID
	return nil
}

// TestOlderWorkersDoNotTakeNewerJobs: during a rolling upgrade, workers of
// the previous version share the queue. One of them would take a "send
// everything again" job, run an ordinary run (it ignores the resend fields)
// and complete the job: the person who asked for the resend is told it was
// queued and nothing is sent again. Jobs an older worker would misread go
// to a queue older workers do not poll.
func TestOlderWorkersDoNotTakeNewerJobs(t *testing.T) {
	b := setup(t)
	path, err := QueuePath(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })

	// The older worker polls River's default queue, as every oncesync
	// before this change did.
	worked := make(chan string, 10)
	workers := river.NewWorkers()
	river.AddWorker(workers, &olderRunSyncWorker{worked: worked})
	older, err := river.NewClient(riversqlite.New(db), &river.Config{
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers:           workers,
		FetchPollInterval: 50 * time.Millisecond,
		FetchCooldown:     50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}

	// The resend first: River fetches jobs in id order, so an older worker
	// that could take it would take it before the ordinary run queued after.
	if _, err := b.svc.EnqueueResend(b.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Enqueue(b.ctx, "b", ReasonManual); err != nil {
		t.Fatal(err)
	}
	if err := older.Start(b.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = older.Stop(ctx)
	})
	timeout := time.After(30 * time.Second)
	for {
		select {
		case id := <-worked:
			if id == "a" {
				t.Fatal("a worker of the previous version took the resend of sync a: it runs an ordinary run and completes the job, and nothing is sent again")
			}
			if id == "b" {
				return // the older worker works what it understands
			}
		case <-timeout:
			t.Fatal("the older worker never took the ordinary run of sync b")
		}
	}
}
