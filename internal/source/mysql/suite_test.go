package mysql_test

import (
	"testing"

	"github.com/oncesync/oncesync/internal/source/mysql"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
)

func TestSuiteTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sourcetest.Run(t, harness(b, "id", func(table string) mysql.Params {
		return mysql.Params{Table: table, CursorColumn: "id"}
	}))
}

func TestSuiteQueryWithIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sourcetest.Run(t, harness(b, "email", func(table string) mysql.Params {
		// id orders the rows; email (unique too) is the identity tie-breaker.
		// The "?" and the comments must not confuse anything.
		return mysql.Params{
			Query:        "SELECT id, email, name, note\nFROM `" + table + "` -- every row?\nWHERE note <> 'what?' OR note IS NOT NULL # all\n;",
			CursorColumn: "id",
			Identity:     "email",
		}
	}))
}

func TestSuiteIdentityOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sourcetest.Run(t, harness(b, "id", func(table string) mysql.Params {
		return mysql.Params{Table: table, Identity: "id"} // cursor_column defaults to identity
	}))
}
