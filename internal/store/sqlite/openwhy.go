package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	sqlitedrv "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"
)

// openProblem is why the store's file could not be opened, in words a person
// can act on (SQLite itself says only "unable to open database file").
type openProblem struct{ advice string }

func (e *openProblem) Error() string  { return e.advice }
func (e *openProblem) Advice() string { return e.advice }

// whyNotOpen returns err with an *openProblem naming what stands in the way
// of opening path (a missing directory, a read-only file system, missing
// write permission, a file that is not a database), or err unchanged when
// none of those does.
func whyNotOpen(path string, err error) error {
	return whyNotOpenIn(path, err, freeBytes)
}

// freeBytes is the room left for this process's writes on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// openRoom is less room than an open needs: the -shm file alone is 32 KiB.
const openRoom = 1 << 20

// whyNotOpenIn is whyNotOpen with the free-space probe given.
func whyNotOpenIn(path string, err error, free func(dir string) (uint64, error)) error {
	if abs, aerr := filepath.Abs(path); aerr == nil {
		path = abs
	}
	dir := filepath.Dir(path)
	var advice string
	if outOfFiles(path) {
		// SQLite says only "unable to open database file" (14).
		advice = "this process has as many files and connections open as its open-files limit allows (ulimit -n, systemd's LimitNOFILE): raise it, or run fewer workers (docs/recovery.md#too_many_open_files)"
	} else if fi, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) || (serr == nil && !fi.IsDir()) {
		advice = fmt.Sprintf("the store's directory %s does not exist; create it, or set store: to a file in a directory that exists", dir)
	} else if serr != nil {
		advice = fmt.Sprintf("the user running oncesync (uid %d) may not reach the store's directory %s: %v", os.Getuid(), dir, errors.Unwrap(serr))
	} else if n, ferr := free(dir); ferr == nil && n < openRoom {
		// Before walGone: an open the disk had no room for leaves the very
		// files (a -shm, an empty -wal) a deleted WAL leaves.
		advice = fmt.Sprintf("the file system of the store's directory %s is full (%d bytes left): free space there, then start oncesync again (docs/recovery.md#store_unavailable)", dir, n)
	} else if walGone(path, err) {
		advice = fmt.Sprintf("the store file %s has a -shm file but no -wal file: the -wal file was deleted while a process had the store open, "+
			"and holds writes only that process can still see; stop every oncesync process using the store with SIGTERM, not kill -9 "+
			"(the last one to close copies them into the store), then start them again", path)
	} else if notADatabase(err) {
		advice = fmt.Sprintf("the store file %s is not a SQLite database; set store: to oncesync's database file, or to a new path to start an empty store", path)
	} else {
		// SQLite writes the file and its -wal and -shm files beside it, and
		// may create them: both the directory and the file must be writable.
		for _, p := range []string{dir, path} {
			aerr := syscall.Access(p, 2) // W_OK
			switch {
			case errors.Is(aerr, syscall.EROFS):
				advice = fmt.Sprintf("the store file %s is on a read-only file system; oncesync writes the store and its -wal, -shm and .queue files beside it: set store: to a path on a writable file system", path)
			case errors.Is(aerr, syscall.EACCES) || errors.Is(aerr, syscall.EPERM):
				advice = fmt.Sprintf("the user running oncesync (uid %d) may not write %s; oncesync writes the store and its -wal, -shm and .queue files in %s: give that user write access to the directory and those files", os.Getuid(), p, dir)
			}
			if advice != "" {
				break
			}
		}
	}
	if advice == "" {
		return err
	}
	return fmt.Errorf("%w: %w", &openProblem{advice: advice}, err)
}

// outOfFiles reports whether the operating system refuses this process the
// files a connection needs at once (the database, its -wal and -shm files,
// and the directory: EMFILE, ENFILE), by opening path's directory as many
// times. SQLite closes what it opened when one of them fails, so a single
// free descriptor after its failure does not mean it had enough.
func outOfFiles(path string) bool {
	var opened []*os.File
	defer func() {
		for _, f := range opened {
			_ = f.Close()
		}
	}()
	for range 4 {
		f, err := os.Open(filepath.Dir(path))
		if err != nil {
			return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
		}
		opened = append(opened, f)
	}
	return false
}

func notADatabase(err error) bool {
	var se *sqlitedrv.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlitelib.SQLITE_NOTADB
}

// walGone reports whether an open of path failed on I/O (err) with its -shm
// file there and its -wal file absent or empty: the index of a WAL deleted
// under a process that still has it (the failed open itself may have created
// an empty -wal file).
func walGone(path string, err error) bool {
	var se *sqlitedrv.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlitelib.SQLITE_IOERR {
		return false
	}
	_, shm := os.Stat(path + "-shm")
	wal, werr := os.Stat(path + "-wal")
	return shm == nil && (errors.Is(werr, fs.ErrNotExist) || (werr == nil && wal.Size() == 0))
}
