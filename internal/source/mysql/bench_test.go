package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source/mysql"
)

// BenchmarkReadPages reads a 20,000-row table in pages of 500 (the
// default page size), as a run does; b.N counts rows.
func BenchmarkReadPages(b *testing.B) {
	bd := setup(b)
	const rows = 20000
	bd.exec(b, "CREATE TABLE contacts (id BIGINT PRIMARY KEY, email VARCHAR(64) NOT NULL, first_name VARCHAR(32) NOT NULL, last_name VARCHAR(32) NOT NULL)")
	for start := 1; start <= rows; start += 2000 {
		var vals []string
		for i := start; i < start+2000; i++ {
			vals = append(vals, fmt.Sprintf("(%d, 'contact%07d@example.com', 'Ada', 'Lovelace')", i, i))
		}
		bd.exec(b, "INSERT INTO contacts VALUES "+strings.Join(vals, ", "))
	}
	src := bd.newSource(b, mysql.Params{Table: "contacts", Identity: "id"})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cursor, n := "", 0
	for n < b.N {
		page, err := src.ReadPage(ctx, cursor, 500)
		if err != nil {
			b.Fatal(err)
		}
		n += len(page.Records)
		cursor = page.Next
		if page.End {
			cursor = ""
		}
	}
}
