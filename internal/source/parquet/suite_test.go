package parquet_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/parquet"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
)

// contact is a row of sourcetest.Records.
type contact struct {
	ID    string `parquet:"id"`
	Email string `parquet:"email"`
	Name  string `parquet:"name"`
	Note  string `parquet:"note"`
}

func contacts(recs []map[string]string) []contact {
	out := make([]contact, len(recs))
	for i, r := range recs {
		out[i] = contact{ID: r["id"], Email: r["email"], Name: r["name"], Note: r["note"]}
	}
	return out
}

// writeRows writes rows as one Parquet file, in row groups of rowGroup rows
// (several per file, so reads cross row groups).
func writeRows[T any](t testing.TB, path string, rows []T, rowGroup int64) {
	t.Helper()
	if err := pq.WriteFile(path, rows, pq.MaxRowsPerRowGroup(rowGroup)); err != nil {
		t.Fatal(err)
	}
}

// key names a record set, so sources over the same records read the same
// path (the same ID), as a new process would.
func key(recs []map[string]string) string {
	b, _ := json.Marshal(recs)
	return fmt.Sprintf("%x", sha256.Sum256(b))[:16]
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// TestSuiteFile: one file of 5-row row groups.
func TestSuiteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sourcetest.Run(t, sourcetest.Harness{New: func(t *testing.T, recs []map[string]string) source.Source {
		path := filepath.Join(dir, key(recs)+".parquet")
		if !exists(path) {
			writeRows(t, path, contacts(recs), 5)
		}
		src, err := parquet.New(parquet.Params{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}})
}

// TestSuiteDirectory: the records split over files of a directory, one of
// them empty and a file that is not Parquet beside them.
func TestSuiteDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	sourcetest.Run(t, sourcetest.Harness{New: func(t *testing.T, recs []map[string]string) source.Source {
		dir := filepath.Join(root, key(recs))
		if !exists(dir) {
			tmp := dir + ".tmp"
			if err := os.MkdirAll(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			rows := contacts(recs)
			// Files of 7, 0, 3, then the rest.
			cuts := []int{0, min(7, len(rows)), min(7, len(rows)), min(10, len(rows)), len(rows)}
			for i := range len(cuts) - 1 {
				writeRows(t, filepath.Join(tmp, fmt.Sprintf("part-%05d.parquet", i)), rows[cuts[i]:cuts[i+1]], 2)
			}
			for _, other := range []string{"_SUCCESS", ".part-00009.parquet", "README.txt"} {
				if err := os.WriteFile(filepath.Join(tmp, other), []byte("not parquet"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Rename(tmp, dir); err != nil {
				t.Fatal(err)
			}
		}
		src, err := parquet.New(parquet.Params{Path: dir})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}})
}
