package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/source"
)

// Kind is a file source's part of the configuration (csv or jsonl, by
// Format): path under source:.
type Kind struct{ Format Format }

// Config is a sync's file source keys.
type Config struct {
	// Path is the file; a relative path is relative to the config file.
	Path string
}

func (k Kind) Type() string                       { return k.Format.String() }
func (Kind) NewSpec() config.SourceSpec           { return &Config{} }
func (Kind) SourceKeys() []string                 { return []string{"path"} }
func (Kind) SecretKeys() []string                 { return nil }
func (c *Config) Decode(_ string, v config.Value) { c.Path = v.String() }

// New opens a sync's file source; dir is the config file's directory.
func (k Kind) New(_ context.Context, s config.Source, dir string) (source.Source, error) {
	return New(Params{Path: s.Spec.(*Config).in(dir), Format: k.Format, MaxRecordBytes: int64(s.MaxRecordBytes)})
}

// in is the file's path, a relative one taken relative to dir (the config
// file's directory).
func (c *Config) in(dir string) string {
	if c.Path != "" && !filepath.IsAbs(c.Path) && dir != "" {
		return filepath.Join(dir, c.Path)
	}
	return c.Path
}

func (c *Config) Check(s *config.Source, k *config.Checker) {
	k.Required("source.path", c.Path, "is required for "+s.Type+" sources")
}

// Preflight reports a file that is not there (or not a file) as
// `oncesync validate` runs: a run would fail on it with source_unavailable.
func (c *Config) Preflight(k *config.Checker) {
	if c.Path == "" || k.Bad("source.path") {
		return
	}
	path := c.in(k.Dir())
	shown := k.ShowPath("source.path", path)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		k.Report("source.path", fmt.Sprintf("%s does not exist (a run would fail with source_unavailable)", shown))
	case err != nil:
		k.Report("source.path", fmt.Sprintf("%s cannot be read: %v", shown, errors.Unwrap(err)))
	case fi.IsDir():
		k.Report("source.path", fmt.Sprintf("%s is a directory, not a file", shown))
	}
}

// DescribeCursor says which record a saved cursor follows.
func (c *Config) DescribeCursor(_ *config.Source, cursor string) string {
	name := filepath.Base(c.Path)
	if cursor == "" {
		return "start of " + name
	}
	p, err := parseCursor(cursor)
	if err != nil {
		return "a cursor this oncesync cannot read (" + name + ")"
	}
	return fmt.Sprintf("after record %s of %s (byte %s)", thousands(p.recno), name, thousands(p.offset))
}

func (c *Config) Secrets() []string { return nil }

// Positional implements config.Positional: without an identity a row's
// slot is its page's cursor (a sum of every byte before it) and its place.
func (c *Config) Positional() string {
	return "rows are known by their place in the file, so an edit anywhere but at its end sends the rows on every later page again (docs/guide.md#sources); set identity to a column that names each row"
}
func (c *Config) Redacted() config.SourceSpec { r := *c; return &r }

// Definition places path after type, as stored definitions have it.
func (c *Config) Definition(common []config.Field) []config.Field {
	if c.Path == "" {
		return common
	}
	return config.InOrder([]string{"type", "path"}, append(common, config.Field{Key: "path", Value: c.Path}))
}
