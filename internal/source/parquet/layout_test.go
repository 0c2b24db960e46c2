package parquet_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// mkdirs makes each directory under root.
func mkdirs(t *testing.T, root string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHivePartitions: Spark's partitionBy, Redshift's UNLOAD ... PARTITION BY,
// DuckDB's PARTITION_BY and pyarrow write a directory per partition value
// (dt=2026-12-01/) and leave the partition column out of the files. Every
// partition's rows are read, with the column from the directory's name; a
// job's _temporary directory, hidden files and markers are not; a run
// stopped in one partition resumes in a new process.
func TestHivePartitions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mkdirs(t, dir, "dt=2026-12-01/region=eu", "dt=2026-12-01/region=us", "dt=2026-12-02/region=eu",
		"dt=__HIVE_DEFAULT_PARTITION__/region=a%2Fb", "_temporary/0/_temporary/attempt_1", ".spark-staging-1")
	writeParts(t, dir, map[string][]contact{
		"dt=2026-12-01/region=eu/part-00000-7c1e-c000.snappy.parquet":   people(1, 4, "A"),
		"dt=2026-12-01/region=us/part-00000-7c1e-c000.snappy.parquet":   people(5, 6, "B"),
		"dt=2026-12-02/region=eu/part-00000-9d2f-c000.snappy.parquet":   people(7, 11, "C"),
		"dt=__HIVE_DEFAULT_PARTITION__/region=a%2Fb/part-00000.parquet": people(12, 12, "D"),
		// Being written by a job that has not committed: not read.
		"_temporary/0/_temporary/attempt_1/part-00001-9d2f-c000.snappy.parquet": people(90, 99, "X"),
		".spark-staging-1/part-00002.parquet":                                   people(80, 89, "Y"),
	})
	for _, other := range []string{"_SUCCESS", "dt=2026-12-01/region=eu/.part-00000-7c1e-c000.snappy.parquet.crc"} {
		if err := os.WriteFile(filepath.Join(dir, other), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	all := readAll(t, open(t, dir), "", 3)
	if got, want := ids(all), []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	for _, c := range []struct {
		i          int
		dt, region any
	}{{0, "2026-12-01", "eu"}, {4, "2026-12-01", "us"}, {10, "2026-12-02", "eu"}, {11, nil, "a/b"}} {
		if f := all[c.i].Fields; f["dt"] != c.dt || f["region"] != c.region || f["name"] == nil {
			t.Errorf("record %s: %v; want dt %v, region %v", f["id"], f, c.dt, c.region)
		}
	}
	// A new process resumes in the second partition: the rest, nothing twice.
	cursor, read := cursorAfter(t, open(t, dir), 3, "6")
	rest := ids(readAll(t, open(t, dir), cursor, 3))
	if got := append(slices.Clone(read), rest...); !reflect.DeepEqual(got, ids(all)) {
		t.Fatalf("read %v, then %v from its cursor; want %v", read, rest, ids(all))
	}
}

// TestFilesWithoutTheExtension: Hive names its files 000000_0, Impala
// x.parq, and a BigQuery EXPORT DATA whose URI had no extension writes
// 000000000000: a complete Parquet file (its magic bytes at both ends) is
// read whatever its name; other files, and one still being written (no
// footer yet), are left out.
func TestFilesWithoutTheExtension(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeParts(t, dir, map[string][]contact{
		"000000000000":       people(1, 2, "A"),
		"000000_0":           people(3, 4, "B"),
		"5d4c_data.0.parq":   people(5, 6, "C"),
		"part-1.parquet.tmp": people(90, 99, "X"),
	})
	whole, err := os.ReadFile(filepath.Join(dir, "part-1.parquet.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"part-1.parquet.tmp": whole[:len(whole)/2], // a writer half-way
		"manifest":           []byte(`{"entries":[]}`),
		"PAR1":               []byte("PAR"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := ids(readAll(t, open(t, dir), "", 4)), []string{"1", "2", "3", "4", "5", "6"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// TestExportsAsPeopleLeaveThem: a directory reached through a symbolic link
// (current -> the newest export) is read where it points, and a pass over
// it reads the export the link named when it began; a backup copy beside
// a file is not a file of the export; an empty directory has no columns,
// which fails a run, where a file with no rows has its schema's.
func TestExportsAsPeopleLeaveThem(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	day1, day2 := filepath.Join(base, "export-1"), filepath.Join(base, "export-2")
	for _, d := range []string{day1, day2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeParts(t, day1, map[string][]contact{"part-0.parquet": people(1, 10, "old")})
	writeParts(t, day2, map[string][]contact{"part-0.parquet": people(1, 12, "new")})
	current := filepath.Join(base, "current")
	if err := os.Symlink(day1, current); err != nil {
		t.Fatal(err)
	}
	src := open(t, current)
	if got := readAll(t, src, "", 4); len(got) != 10 || got[0].Fields["name"] != "old" {
		t.Fatalf("through the link: %d records (%v), want export-1's 10", len(got), ids(got))
	}
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(day2, current); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, open(t, current+string(filepath.Separator)), "", 4); len(got) != 12 || got[0].Fields["name"] != "new" {
		t.Fatalf("after the link moved: %d records, want export-2's 12", len(got))
	}

	// A backup beside the file, sorted after it, is left out.
	data, err := os.ReadFile(filepath.Join(day1, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"part-0.parquet.bak", "part-0.parquet~", "part-0.parquet.orig", "part-0.parquet.1", "part-0.parquet.20261205"} {
		if err := os.WriteFile(filepath.Join(day2, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, open(t, day2), "", 4); len(got) != 12 || got[11].Fields["name"] != "new" {
		t.Fatalf("with backups beside it: %d records, want the export's 12", len(got))
	}

	// A partition directory linked into the export is read, and a link
	// back up (a cycle) does not read anything twice.
	other := filepath.Join(base, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	writeParts(t, other, map[string][]contact{"part-0.parquet": people(100, 104, "linked")})
	if err := os.Symlink(other, filepath.Join(day1, "dt=2026-12-06")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(day1, filepath.Join(other, "loop")); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, open(t, day1), "", 4)
	if len(got) != 15 || got[0].Fields["dt"] != "2026-12-06" || got[0].Fields["name"] != "linked" {
		t.Fatalf("with a linked partition: %d records (%v), want 15, the linked ones with their dt", len(got), ids(got))
	}

	empty := filepath.Join(base, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	src = open(t, empty)
	if got := readAll(t, src, "", 4); len(got) != 0 {
		t.Fatalf("an empty directory gave %d records", len(got))
	}
	if cols := src.Columns(); cols == nil || len(cols) != 0 {
		t.Fatalf("an empty directory's columns are %v, want none (known)", cols)
	}
	writeRows(t, filepath.Join(empty, "part-0.parquet"), []contact{}, 3)
	src = open(t, empty)
	readAll(t, src, "", 4)
	if cols := src.Columns(); !reflect.DeepEqual(cols, []string{"id", "email", "name", "note"}) {
		t.Fatalf("a file without rows has columns %v, want its schema's", cols)
	}
	writeParts(t, empty, map[string][]contact{"part-1.parquet": people(1, 2, "x")})
	src = open(t, empty)
	readAll(t, src, "", 4)
	if cols := src.Columns(); cols != nil {
		t.Fatalf("after a pass that read records, columns %v, want nil", cols)
	}
}
