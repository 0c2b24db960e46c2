package queue

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/partition"
)

// Job heartbeats (docs/guide.md#running-on-a-schedule-serve-and-worker). Every job of a run kind (a run, a partitioned
// run's coordinator, a partition) holds a lease of its own, its heartbeat,
// from the moment its Work starts until shortly after it returns: taken
// first, renewed every LeaseRenew, and left to expire completionTail after
// the work. It fences nothing (nothing is written under it). It tells lease-expiry recovery that the job's worker is alive
// while the job holds no run lease: a coordinator never takes one, and a run
// or a partition takes its own only once its pipeline is built. A job
// running for longer than a lease TTL with neither its heartbeat nor its
// run's lease live lost its worker, and is rescued at once.

// heartbeatID is the lease id of the heartbeat of a job of kind working
// slot (the sync of a run or a coordinator, the partition.SyncID of a
// partition). Sync ids never hold "#", so it names no sync and no
// partition.
func heartbeatID(kind, slot string) string {
	if kind == KindRunPartitioned {
		return slot + "#coordinator"
	}
	return slot + "#job"
}

// beatOwner names one attempt of job j (its id and attempt), recorded as
// its heartbeat lease's run id, so that a sweep tells that attempt's own
// heartbeat from an earlier attempt's (beatDiedHere).
func beatOwner(j *rivertype.JobRow) int64 {
	return j.ID*1000 + int64(min(max(j.Attempt, 0), 999))
}

// heartbeat takes the heartbeat id for the job attempt owner (beatOwner)
// and keeps it until the returned stop is called. A heartbeat that cannot be
// taken (the lease store is down, or another job of the slot holds it after
// a rescue) does not stop the work: the job is then judged by its run's
// lease alone.
func (s *Service) heartbeat(ctx context.Context, id string, owner int64) (stop func()) {
	ttl, renew := s.cfg.Settings.LeaseTTL, s.renewEvery()
	g, err := s.leases.Acquire(ctx, lease.AcquireParams{SyncID: id, RunID: owner, TTL: ttl})
	if err != nil {
		s.log.Warn("job heartbeat not taken; recovery judges the job by its run's lease alone", "heartbeat", id, "err", err)
		return func() {}
	}
	// Renewals outlive a cancelled job context (a drain) until stop.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(renew)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			cctx, ccancel := context.WithTimeout(rctx, renew)
			ng, err := s.leases.Renew(cctx, g, ttl)
			ccancel()
			switch {
			case errors.Is(err, lease.ErrLost):
				// Recovery may hand the job to another worker now; the
				// run's own lease still keeps the two from writing twice.
				s.log.Warn("job heartbeat lost", "heartbeat", id, "err", err)
				return
			case err == nil:
				g = ng
			}
			// Another error: the store is unreachable; try again next tick.
		}
	}()
	return func() {
		cancel()
		<-finished
		relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer relCancel()
		// The work is done, but River records the job completed a moment
		// later (its completer batches): a heartbeat released now would let
		// a recovery sweep in between find a running job with no live lease
		// and run it again. So it is left to expire completionTail from now
		// instead; a worker that dies in between is still found, that much
		// later.
		if _, err := s.leases.Renew(relCtx, g, min(completionTail, ttl)); err == nil {
			return
		}
		if err := s.leases.Release(relCtx, g); err != nil {
			s.log.Warn("job heartbeat not released; it expires by itself", "heartbeat", id, "err", err)
		}
	}
}

// renewEvery is how often a lease of this process is renewed:
// settings.lease_renew, or a third of the TTL when it is unset or not
// shorter than the TTL.
func (s *Service) renewEvery() time.Duration {
	ttl, renew := s.cfg.Settings.LeaseTTL, s.cfg.Settings.LeaseRenew
	if renew <= 0 || renew >= ttl {
		return ttl / 3
	}
	return renew
}

// completionTail is how long a job's heartbeat outlives its work: longer
// than River takes to record the job completed.
const completionTail = 2 * time.Second

// jobWork is what a running job of a run kind works, for recovery.
type jobWork struct {
	kind string
	// slot is the sync (a run, a coordinator) or partition (partition.SyncID)
	// the job works.
	slot string
	// runLease is the lease of the run the job works (slot), "" for a
	// coordinator, which holds none.
	runLease string
	// beat is the job's heartbeat.
	beat string
}

// workOf decodes a running job of a run kind.
func workOf(j *rivertype.JobRow) (jobWork, bool) {
	switch j.Kind {
	case KindRunSync:
		a, ok := runArgs(j.Kind, nil, j.EncodedArgs)
		if !ok {
			return jobWork{}, false
		}
		return jobWork{kind: j.Kind, slot: a.SyncID, runLease: a.SyncID, beat: heartbeatID(j.Kind, a.SyncID)}, true
	case KindRunPartitioned:
		var a RunPartitionedArgs
		if json.Unmarshal(j.EncodedArgs, &a) != nil || a.SyncID == "" {
			return jobWork{}, false
		}
		return jobWork{kind: j.Kind, slot: a.SyncID, beat: heartbeatID(j.Kind, a.SyncID)}, true
	case KindRunPartition:
		a, ok := partitionArgs(j)
		if !ok || a.SyncID == "" {
			return jobWork{}, false
		}
		id := partition.SyncID(a.SyncID, a.Partition)
		return jobWork{kind: j.Kind, slot: id, runLease: id, beat: heartbeatID(j.Kind, id)}, true
	}
	return jobWork{}, false
}

// beatDiedHere reports whether the heartbeat of job j's current attempt is
// held by a dead process of this machine (lease.DeadHere): the attempt took
// it and its worker died, whatever the job's age
// (docs/RELIABILITY.md#resume-after-a-kill).
func (s *Service) beatDiedHere(ctx context.Context, w jobWork, j *rivertype.JobRow, self lease.Process) bool {
	l, err := s.inspector.LeaseGet(ctx, w.beat)
	return err == nil && l.RunID == beatOwner(j) && lease.DeadHere(l.Holder, self)
}

// workerGone reports whether the worker of a job (running for longer than
// a lease TTL) is gone: neither its heartbeat nor its run's lease is live.
// Each is read as leaseLive reads a run's lease, so when unsure it is alive.
func (s *Service) workerGone(ctx context.Context, w jobWork, now time.Time, self lease.Process) bool {
	if s.leaseLive(ctx, w.beat, now, self) {
		return false
	}
	return w.runLease == "" || !s.leaseLive(ctx, w.runLease, now, self)
}
