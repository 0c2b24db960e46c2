package config_test

import (
	"strings"
	"testing"
)

// TestMaxRecordBytes: the common source key defaults to 1 MiB for every
// source type, is checked against its range, and enters the definition
// only when set otherwise (definitions stored before it stay equal).
func TestMaxRecordBytes(t *testing.T) {
	t.Parallel()
	load := loadWithSource
	for _, src := range []string{"{type: csv, path: a.csv}", "{type: parquet, path: exports}",
		"{type: postgres, dsn: 'postgres://u@h/db', table: t, identity: id}"} {
		cfg, err := load(t, src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		s := cfg.Syncs[0]
		def, _ := s.DefinitionJSON()
		if s.Source.MaxRecordBytes != 1<<20 || strings.Contains(def, "max_record_bytes") {
			t.Fatalf("%s: MaxRecordBytes %d, definition %s; want 1048576, not in the definition", src, s.Source.MaxRecordBytes, def)
		}
	}
	cfg, err := load(t, "{type: jsonl, path: a.jsonl, max_record_bytes: 4096}")
	if err != nil {
		t.Fatal(err)
	}
	def, _ := cfg.Syncs[0].DefinitionJSON()
	if cfg.Syncs[0].Source.MaxRecordBytes != 4096 || !strings.Contains(def, `"max_record_bytes":4096`) {
		t.Fatalf("MaxRecordBytes %d, definition %s; want 4096 in both", cfg.Syncs[0].Source.MaxRecordBytes, def)
	}
	for _, v := range []string{"10", "2147483647", "0"} {
		_, err := load(t, "{type: csv, path: a.csv, max_record_bytes: "+v+"}")
		if got := problemsOf(t, err); len(got) != 1 || !strings.Contains(got[0], "syncs[0].source.max_record_bytes: must be between 1024 and 1073741824, got "+v) {
			t.Fatalf("max_record_bytes %s: problems %q", v, got)
		}
	}
}
