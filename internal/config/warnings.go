package config

import "strconv"

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
		if wr, ok := s.Destination.Spec.(Warner); ok {
			for _, w := range wr.Warnings() {
				out = append(out, at+".destination."+w)
			}
		}
	}
	return out
}
