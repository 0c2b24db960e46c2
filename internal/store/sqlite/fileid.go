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
// process opened, or its -wal file is gone. Its Advice says what to do.
type fileGone struct {
	path string
	why  string
	wal  bool // the -wal file, not the database file
}

func (e *fileGone) Error() string {
	return fmt.Sprintf("the store file %s %s while this process had it open", e.path, e.why)
}

func (e *fileGone) Advice() string {
	if e.wal {
		// SQLite's last connection to close copies its WAL, deleted or
		// not, into the database file: a clean stop keeps the writes.
		return e.Error() + "; stop every oncesync process using it with SIGTERM, not kill -9 (the last one to " +
			"close copies what the deleted -wal file held into the store), then start them again"
	}
	return e.Error() + "; stop every oncesync process using it, restore the file if you can (records it " +
		"remembered are otherwise sent again), then start them again"
}

// checkFile returns nil while s.path names the file opened and its -wal file
// exists, else an error wrapping store.ErrUnavailable and a *fileGone. The
// -wal file exists while any connection has the database open (the last to
// close deletes it), and this process keeps its write connection open.
func (s *Store) checkFile(op string) error {
	if s.file == nil {
		return nil
	}
	fi, err := os.Stat(s.path)
	gone := &fileGone{path: s.path}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		gone.why = "was deleted"
	case err != nil:
		return fmt.Errorf("sqlite %s: %w: %w", op, store.ErrUnavailable, err)
	case !os.SameFile(fi, s.file):
		gone.why = "was replaced by another file"
	default:
		_, err := os.Stat(s.path + "-wal")
		if !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		gone.why, gone.wal = "lost its -wal file (deleted)", true
	}
	return fmt.Errorf("sqlite %s: %w: %w", op, store.ErrUnavailable, gone)
}
