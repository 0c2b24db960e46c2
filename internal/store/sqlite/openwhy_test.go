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
