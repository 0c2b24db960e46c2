package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
)

// TestMaxRecordBytes: a row whose values sum past the limit fails the
// page with source.ErrInvalid naming the row's place, not its values; the
// rows before it are read.
func TestMaxRecordBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.table("big")
	b.exec(t, "CREATE TABLE "+tbl+" (id int PRIMARY KEY, note text)",
		"INSERT INTO "+tbl+" SELECT i, 'small' FROM generate_series(1, 5) i",
		"UPDATE "+tbl+" SET note = 'secret' || repeat('x', 3000) WHERE id = 4")
	src := b.newSource(t, postgres.Params{Table: tbl, Identity: "id", MaxRecordBytes: 2048})
	page, err := src.ReadPage(context.Background(), "", 2)
	if err != nil || len(page.Records) != 2 {
		t.Fatalf("first page: %d records, %v", len(page.Records), err)
	}
	_, err = src.ReadPage(context.Background(), page.Next, 2)
	if !errors.Is(err, source.ErrInvalid) {
		t.Fatalf("page with the large row: %v; want source.ErrInvalid", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "row 2 of the page") || !strings.Contains(msg, "max_record_bytes") || strings.Contains(msg, "secret") {
		t.Fatalf("error %q: want the row's place and max_record_bytes, no value", msg)
	}
	// The default limit (1 MiB) reads it.
	all := b.newSource(t, postgres.Params{Table: tbl, Identity: "id"})
	page, err = all.ReadPage(context.Background(), "", 10)
	if err != nil || len(page.Records) != 5 || !strings.HasPrefix(page.Records[3].Fields["note"].(string), "secret") {
		t.Fatalf("default limit: %d records, %v", len(page.Records), err)
	}
}
