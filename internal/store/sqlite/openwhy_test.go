package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestOpenSaysWhy: SQLite says only "unable to open database file"; the
// detail a person reads says what stands in the way, and the code stays
// store_unavailable.
func TestOpenSaysWhy(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database at all. ", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, path, want string }{
		{"missing directory", filepath.Join(dir, "absent", "oncesync.db"), "directory " + filepath.Join(dir, "absent") + " does not exist"},
		{"not a database", notDB, notDB + " is not a SQLite database"},
	}
	if os.Getuid() != 0 { // root writes anywhere
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o500); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, path, want string }{"directory not writable", filepath.Join(locked, "oncesync.db"), "may not write " + locked})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(t.Context(), OpenParams{Path: c.path})
			if err == nil {
				t.Fatal("opened")
			}
			if !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("%v: not store unavailable", err)
			}
			fe := failure.Wrap(failure.StoreUnavailable, err, "open the SQLite store")
			if !strings.Contains(fe.Detail, c.want) {
				t.Fatalf("detail %q; want it to say %q", fe.Detail, c.want)
			}
		})
	}
}

// TestOpenNewerSchemaSaysUpgrade: an older binary on a store a newer one
// migrated is refused; the person reads why and what to run, not a bare
// "open the SQLite store".
func TestOpenNewerSchemaSaysUpgrade(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncesync.db")
	s, err := Open(t.Context(), OpenParams{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_, err = Open(t.Context(), OpenParams{Path: path})
	if err == nil {
		t.Fatal("opened a store of a newer schema")
	}
	d := failure.Wrap(failure.StoreUnavailable, err, "open the SQLite store").Detail
	if !strings.Contains(d, "written by a newer oncesync (schema version 999") {
		t.Fatalf("detail %q does not say a newer oncesync wrote the store", d)
	}
}

// TestOpenOnAFullDiskSaysFull: an open the disk had no room for leaves a
// -shm file and an empty -wal, as a WAL deleted under a running process
// does; the detail says the disk is full, not "stop every oncesync
// process" (an independent check, 2026-12-06, on a full tmpfs).
func TestOpenOnAFullDiskSaysFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "oncesync.db")
	for f, data := range map[string]string{path: "", path + "-wal": "", path + "-shm": "shm"} {
		if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	openErr := errors.New("disk I/O error")
	full := func(string) (uint64, error) { return 4096, nil }
	roomy := func(string) (uint64, error) { return 10 << 30, nil }
	if err := whyNotOpenIn(path, openErr, full); !strings.Contains(err.Error(), "the file system of the store's directory "+dir+" is full (4096 bytes left)") {
		t.Fatalf("full disk: %v", err)
	}
	if err := whyNotOpenIn(path, openErr, roomy); strings.Contains(err.Error(), "is full") {
		t.Fatalf("a disk with room said full: %v", err)
	}
}
