package config

import (
	"strconv"
	"strings"
)

// Warner is implemented by a source or destination spec with settings
// that work but are unsafe (a PostgreSQL dsn whose sslmode does not
// verify the server): `oncesync validate` prints its warnings.
type Warner interface {
	// Warnings are "field: what is unsafe, what to do" lines, field
	// relative to the spec (e.g. "dsn").
	Warnings() []string
}

// Positional is implemented by a source spec whose rows, without an
// identity, are known by their place (a file's): `oncesync validate` warns
// when such a sync sets no identity.
type Positional interface {
	// Positional says what a row's place means for the sync, and what to do.
	Positional() string
}

// Keyset is implemented by a source spec whose runs go on from the last row
// read, in the order of a cursor column (postgres, mysql): `oncesync
// validate` warns when that column is the identity, which no update moves.
type Keyset interface {
	// KeysetColumn is the cursor_column as written ("": the identity).
	KeysetColumn() string
}

// keysetByIdentity is the warning of a Keyset source paged by its identity.
const keysetByIdentity = "pages follow the identity: a run reads only rows whose identity is past the last one read, " +
	"so a row changed after it was read never reaches the destination again, and an id committed after a higher one " +
	"is never read; set cursor_column to a time column every write stamps (updated_at), unless the table only ever " +
	"gets new rows (docs/guide.md#rows-committed-late)"

// Warnings are what `oncesync validate` warns about: settings that work but
// leave a connection unprotected, or rows known only by their place. Each is
// "FIELD: message".
func (c *Config) Warnings() []string {
	var out []string
	if w := SSLModeWarning(c.Store); w != "" && isPostgres(c.Store) {
		out = append(out, "store: "+w)
	}
	for i, s := range c.Syncs {
		at := "syncs[" + strconv.Itoa(i) + "]"
		if wr, ok := s.Source.Spec.(Warner); ok {
			for _, w := range wr.Warnings() {
				out = append(out, at+".source."+w)
			}
		}
		if p, ok := s.Source.Spec.(Positional); ok && s.Source.Identity == "" {
			out = append(out, at+".source.identity: not set: "+p.Positional())
		}
		if k, ok := s.Source.Spec.(Keyset); ok {
			if col := k.KeysetColumn(); col == "" || col == s.Source.Identity {
				out = append(out, at+".source.cursor_column: "+keysetByIdentity)
			}
		}
		if wr, ok := s.Destination.Spec.(Warner); ok {
			for _, w := range wr.Warnings() {
				out = append(out, at+".destination."+w)
			}
		}
	}
	return out
}

// WarningProblems are Warnings located as problems are, so `oncesync
// validate` prints each as FILE:LINE: FIELD: MESSAGE.
func (c *Config) WarningProblems() []Problem {
	ws := c.Warnings()
	out := make([]Problem, 0, len(ws))
	for _, w := range ws {
		field, msg, _ := strings.Cut(w, ": ")
		out = append(out, Problem{File: c.Path, Line: c.warnLines[field], Field: field, Msg: msg})
	}
	return out
}
