package store

// PruneRunPagesChunk bounds the page rows one prune statement deletes, so
// that a run of many pages is pruned in short statements.
const PruneRunPagesChunk = 5000

// RunPagesPruner is one store's two steps of PruneRunPages.
type RunPagesPruner struct {
	// Next returns the smallest run id above after that has page rows (ok
	// false: none).
	Next func(after int64) (runID int64, ok bool, err error)
	// Delete deletes at most PruneRunPagesChunk of runID's page rows
	// checkpointed before the cut, and reports whether a row at or after
	// the cut remains (young).
	Delete func(runID int64) (n int64, young bool, err error)
}

// Walk is the walk every store's PruneRunPages makes (Runs.PruneRunPages):
// runs oldest first, a run again while a full chunk went, stopping at the
// first run left with a younger page. It returns the rows deleted, also
// when it stops on an error.
func (p RunPagesPruner) Walk() (int64, error) {
	var total int64
	for after := int64(0); ; {
		runID, ok, err := p.Next(after)
		if err != nil || !ok {
			return total, err
		}
		n, young, err := p.Delete(runID)
		total += n
		switch {
		case err != nil:
			return total, err
		case n == PruneRunPagesChunk:
			// The same run again: it may have more old pages.
		case young:
			return total, nil
		default:
			after = runID
		}
	}
}
