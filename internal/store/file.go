package store

import (
	"errors"
	"io/fs"
	"os"
)

// CreatePrivateFile creates the file path, readable and writable by its
// owner only, unless it exists (whose mode is left as its owner set it). A
// SQLite store or queue file holds identities, destinations' messages and
// sign-in sessions; SQLite gives the -wal and -shm files beside it the
// database file's mode, so they are private too.
func CreatePrivateFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	return f.Close()
}
