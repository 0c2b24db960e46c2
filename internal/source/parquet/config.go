package parquet

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

// Kind is the parquet source's part of the configuration: path under
// source:.
type Kind struct{}

// Config is a sync's parquet source keys.
type Config struct {
	// Path is a .parquet file or a directory of them; a relative path is
	// relative to the config file.
	Path string
}

func (Kind) Type() string                         { return "parquet" }
func (Kind) NewSpec() config.SourceSpec           { return &Config{} }
func (Kind) SourceKeys() []string                 { return []string{"path"} }
func (Kind) SecretKeys() []string                 { return nil }
func (c *Config) Decode(_ string, v config.Value) { c.Path = v.String() }

// New opens a sync's parquet source; dir is the config file's directory.
func (Kind) New(_ context.Context, s config.Source, dir string) (source.Source, error) {
	return New(Params{Path: s.Spec.(*Config).in(dir), MaxRecordBytes: int64(s.MaxRecordBytes)})
}

// in is the path, a relative one taken relative to dir (the config file's
// directory).
func (c *Config) in(dir string) string {
	if c.Path != "" && !filepath.IsAbs(c.Path) && dir != "" {
		return filepath.Join(dir, c.Path)
	}
	return c.Path
}

func (c *Config) Check(_ *config.Source, k *config.Checker) {
	k.Required("source.path", c.Path, "is required for parquet sources (a .parquet file or a directory of them)")
}

// Preflight reports a path that is not there as `oncesync validate` runs: a
// run would fail on it with source_unavailable.
func (c *Config) Preflight(k *config.Checker) {
	if c.Path == "" || k.Bad("source.path") {
		return
	}
	path := c.in(k.Dir())
	shown := k.ShowPath("source.path", path)
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		k.Report("source.path", fmt.Sprintf("%s does not exist (a run would fail with source_unavailable)", shown))
	case err != nil:
		k.Report("source.path", fmt.Sprintf("%s cannot be read: %v", shown, errors.Unwrap(err)))
	}
}

// DescribeCursor says which row a saved cursor follows.
func (c *Config) DescribeCursor(_ *config.Source, cursor string) string {
	return Describe(filepath.Base(c.Path), cursor)
}

func (c *Config) Secrets() []string { return nil }

// Positional implements config.Positional: without an identity a row's
// slot is its place in the files.
func (c *Config) Positional() string {
	return "rows are known by their place in the files, so a file rewritten (or one added before others by name) sends the rows from it on again (docs/guide.md#sources); set identity to a column that names each row"
}
func (c *Config) Redacted() config.SourceSpec { r := *c; return &r }

// Definition places path after type, as the file sources do.
func (c *Config) Definition(common []config.Field) []config.Field {
	if c.Path == "" {
		return common
	}
	return config.InOrder([]string{"type", "path"}, append(common, config.Field{Key: "path", Value: c.Path}))
}
