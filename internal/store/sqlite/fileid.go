package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/oncesync/oncesync/internal/store"
)

// A process keeps using the file it opened even after the path stops naming
// it (deleted, or another file moved over it): SQLite writes on into the
// unlinked inode while a process started later (cron's `oncesync run`)
// creates or opens the file now at the path. Two stores then each grant the
// sync's lease, and every record is written twice. So every write
// transaction, and the read behind /readyz, first checks that the path still
// names the file opened, and refuses (store unavailable) when it does not
// (docs/recovery.md#store_unavailable).

// fileGone is the refusal: the store's path no longer names the file this
// process opened. Its Advice says what to do.
type fileGone struct {
	path string
	why  string
}

func (e *fileGone) Error() string {
	return fmt.Sprintf("the store file %s %s while this process had it open", e.path, e.why)
}

func (e *fileGone) Advice() string {
	return e.Error() + "; stop every oncesync process using it, restore the file if you can (records it " +
		"remembered are otherwise sent again), then start them again"
}

// checkFile returns nil while s.path names the file opened, else an error
// wrapping store.ErrUnavailable and a *fileGone.
func (s *Store) checkFile(op string) error {
	if s.file == nil {
		return nil
	}
	fi, err := os.Stat(s.path)
	var why string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "was deleted"
	case err != nil:
		return fmt.Errorf("sqlite %s: %w: %w", op, store.ErrUnavailable, err)
	case !os.SameFile(fi, s.file):
		why = "was replaced by another file"
	default:
		return nil
	}
	return fmt.Errorf("sqlite %s: %w: %w", op, store.ErrUnavailable, &fileGone{path: s.path, why: why})
}
