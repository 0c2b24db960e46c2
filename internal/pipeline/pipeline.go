// Package pipeline assembles a sync from its config: store, source,
// destination and the runner's view of the sync.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// OpenStore opens the config's store. Relative SQLite paths are relative to
// the config file's directory.
func OpenStore(ctx context.Context, cfg *config.Config, clk clock.Clock) (store.Store, error) {
	switch {
	case strings.HasPrefix(cfg.Store, "sqlite:"):
		path, err := sqlite.ParseURL(cfg.Store)
		if err != nil {
			return nil, failure.Wrap(failure.InvalidSyncDefinition, err, "store %q is not a valid sqlite URL", cfg.Store)
		}
		if !filepath.IsAbs(path) && cfg.Path != "" {
			path = filepath.Join(filepath.Dir(cfg.Path), path)
		}
		st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: path, Clock: clk})
		if err != nil {
			return nil, failure.Wrap(failure.StoreUnavailable, err, "open the SQLite store")
		}
		return st, nil
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, "only sqlite:// stores are supported by this build")
	}
}

// Options are what the process provides beyond the config.
type Options struct {
	Clock      clock.Clock
	HTTPClient *http.Client
}

// Built is an assembled sync.
type Built struct {
	Source      source.Source
	Destination destination.Destination
	Sync        runner.Sync
}

// Close closes the source and destination.
func (b *Built) Close() error {
	err := b.Source.Close()
	if derr := b.Destination.Close(); err == nil {
		err = derr
	}
	return err
}

// Build assembles sync s of cfg.
func Build(cfg *config.Config, s *config.Sync, o Options) (*Built, error) {
	src, err := buildSource(cfg, s)
	if err != nil {
		var fe *failure.Error
		if !errors.As(err, &fe) {
			err = failure.Wrap(failure.InvalidSyncDefinition, err, "the source cannot be set up: %v", err)
		}
		return nil, err
	}
	dst, err := buildDestination(s, o)
	if err != nil {
		src.Close()
		var fe *failure.Error
		if !errors.As(err, &fe) {
			err = failure.Wrap(failure.InvalidSyncDefinition, err, "the destination cannot be set up: %v", err)
		}
		return nil, err
	}
	retention := cfg.Settings.LedgerRetention
	if s.LedgerRetention > 0 {
		retention = s.LedgerRetention
	}
	return &Built{
		Source:      src,
		Destination: dst,
		Sync: runner.Sync{
			ID:                         s.ID,
			Workspace:                  s.Workspace,
			PageSize:                   s.Source.PageSize,
			Identity:                   s.Source.Identity,
			Mapping:                    MappingSpec(s.Mapping),
			Retention:                  retention,
			AllowRewriteAfterRetention: s.AllowRewriteAfterRetention,
		},
	}, nil
}

// MappingSpec converts the config's mapping.
func MappingSpec(m config.Mapping) mapping.Spec {
	return mapping.Spec{Email: m.Email, ExtID: m.ExtID, Attributes: m.Attributes, Fields: m.Fields}
}

func buildSource(cfg *config.Config, s *config.Sync) (source.Source, error) {
	path := s.Source.Path
	if path != "" && !filepath.IsAbs(path) && cfg.Path != "" {
		path = filepath.Join(filepath.Dir(cfg.Path), path)
	}
	switch s.Source.Type {
	case "csv":
		return file.New(file.Params{Path: path, Format: file.CSV})
	case "jsonl":
		return file.New(file.Params{Path: path, Format: file.JSONL})
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("source type %q is not supported by this build", s.Source.Type))
	}
}

func buildDestination(s *config.Sync, o Options) (destination.Destination, error) {
	d := s.Destination
	switch d.Type {
	case "brevo":
		return brevo.New(brevo.Params{
			BaseURL: d.BaseURL, APIKey: d.APIKey, Mode: d.Mode, ListIDs: d.ListIDs,
			Concurrency: d.Concurrency, Timeout: d.Timeout, RateLimit: d.RateLimit,
			HTTPClient: o.HTTPClient, Clock: o.Clock,
		})
	case "webhook":
		return webhook.New(webhook.Params{
			URL: d.URL, Mode: d.Mode, Headers: d.Headers, Secret: d.Secret,
			Concurrency: d.Concurrency, Timeout: d.Timeout, HTTPClient: o.HTTPClient, Clock: o.Clock,
		})
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("destination type %q is not supported", d.Type))
	}
}
