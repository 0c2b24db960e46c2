package store

// KeepRunsPerSync is how many of each sync's newest runs PruneRuns keeps
// whatever their age: the circuit breaker's longest streak (breaker_failures
// is at most 1000), the pages' and status's recent runs and the coordinator's
// view of its partitions all read a sync's newest runs.
const KeepRunsPerSync = 1000

// PruneRunsChunk bounds the runs one prune statement deletes.
const PruneRunsChunk = 1000

// RunsPruner is one store's two steps of PruneRuns.
type RunsPruner struct {
	// Next returns the smallest sync id above after that has runs (ok
	// false: none).
	Next func(after string) (syncID string, ok bool, err error)
	// Delete deletes at most PruneRunsChunk of syncID's prunable runs (and
	// their page rows) and returns how many runs.
	Delete func(syncID string) (n int64, err error)
}

// Walk is the walk every store's PruneRuns makes (Runs.PruneRuns): sync by
// sync, a sync again while a full chunk went. It returns the runs deleted,
// also when it stops on an error.
func (p RunsPruner) Walk() (int64, error) {
	var total int64
	for after := ""; ; {
		syncID, ok, err := p.Next(after)
		if err != nil || !ok {
			return total, err
		}
		n, err := p.Delete(syncID)
		total += n
		switch {
		case err != nil:
			return total, err
		case n == PruneRunsChunk:
			// The same sync again: it may have more.
		default:
			after = syncID
		}
	}
}
