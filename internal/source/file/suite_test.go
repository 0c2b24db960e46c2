package file_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
)

// encodeCSV writes recs as CSV with a header of sourcetest.Columns.
func encodeCSV(t testing.TB, recs []map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if len(recs) == 0 {
		return nil
	}
	w := csv.NewWriter(&buf)
	cols := sourcetest.Columns(recs)
	row := make([]string, len(cols))
	if err := w.Write(cols); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		for i, c := range cols {
			row[i] = r[c]
		}
		if err := w.Write(row); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// encodeJSONL writes recs as one JSON object per line.
func encodeJSONL(t testing.TB, recs []map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// harness writes each distinct record set once under dir, so sources over the
// same records read the same path (same ID), as a new process would.
func harness(dir string, format file.Format, encode func(testing.TB, []map[string]string) []byte) sourcetest.Harness {
	return sourcetest.Harness{New: func(t *testing.T, recs []map[string]string) source.Source {
		data := encode(t, recs)
		path := filepath.Join(dir, fmt.Sprintf("%x.%s", sha256.Sum256(data), format))
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		src, err := file.New(file.Params{Path: path, Format: format})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}}
}

func TestSuiteCSV(t *testing.T) {
	t.Parallel()
	sourcetest.Run(t, harness(t.TempDir(), file.CSV, encodeCSV))
}

func TestSuiteCSVHeaderOnlyWhenEmpty(t *testing.T) {
	t.Parallel()
	// An empty record set written as a header line alone.
	sourcetest.Run(t, harness(t.TempDir(), file.CSV, func(t testing.TB, recs []map[string]string) []byte {
		if len(recs) == 0 {
			return []byte("id,email,name,note\r\n")
		}
		return encodeCSV(t, recs)
	}))
}

func TestSuiteJSONL(t *testing.T) {
	t.Parallel()
	sourcetest.Run(t, harness(t.TempDir(), file.JSONL, encodeJSONL))
}

func jsonNumber(s string) json.Number { return json.Number(s) }
