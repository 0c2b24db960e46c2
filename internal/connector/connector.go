// Package connector is the registry of connectors: each source and
// destination package describes itself (its config keys, checks, secrets
// and constructor) and is listed here, in one line. config decodes a
// sync's source and destination with Kinds; app builds them with Lookup and
// LookupSource.
package connector

import (
	"context"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/destination/hubspot"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/source/mysql"
	"github.com/oncesync/oncesync/internal/source/parquet"
	"github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/source/shopify"
)

// Source is a registered source connector.
type Source interface {
	config.SourceKind
	// New opens a sync's source (s.Spec is the connector's own spec); dir
	// is the config file's directory, for relative paths. Its errors wrap
	// source.ErrUnavailable or source.ErrInvalid where they can.
	New(ctx context.Context, s config.Source, dir string) (source.Source, error)
}

// Destination is a registered destination connector.
type Destination interface {
	config.DestinationKind
	// New builds a sync's destination from its configuration (d.Spec is
	// the connector's own spec), and the mapping its records take.
	New(d config.Destination, o destination.Options) (destination.Destination, mapping.Spec, error)
}

// Registry lists connectors. The zero value holds none; Default holds the
// product's.
type Registry struct {
	sources      []Source
	destinations []Destination
}

// Default is the registry of every connector the product ships.
func Default() *Registry {
	r := New(
		brevo.Kind{},
		webhook.Kind{},
		hubspot.Kind{},
		klaviyo.Kind{},
	)
	r.sources = []Source{
		file.Kind{Format: file.CSV},
		file.Kind{Format: file.JSONL},
		postgres.Kind{},
		mysql.Kind{},
		parquet.Kind{},
		shopify.Kind{},
	}
	return r
}

// Sources are the registered sources, in registration order.
func (r *Registry) Sources() []Source { return append([]Source(nil), r.sources...) }

// LookupSource returns the source connector of type t.
func (r *Registry) LookupSource(t string) (Source, bool) {
	for _, s := range r.sources {
		if s.Type() == t {
			return s, true
		}
	}
	return nil, false
}

// New is a registry of ds and no sources (a test adds its own destination
// to Default's with Default().WithDestinations(mine)).
func New(ds ...Destination) *Registry { return &Registry{destinations: ds} }

// WithDestinations is r with ds registered after its destinations.
func (r *Registry) WithDestinations(ds ...Destination) *Registry {
	return &Registry{sources: r.sources, destinations: append(append([]Destination(nil), r.destinations...), ds...)}
}

// Destinations are the registered destinations, in registration order.
func (r *Registry) Destinations() []Destination { return append([]Destination(nil), r.destinations...) }

// Kinds is what config.Load needs of the registry.
func (r *Registry) Kinds() config.Kinds {
	k := config.Kinds{}
	for _, s := range r.sources {
		k.Sources = append(k.Sources, s)
	}
	for _, d := range r.destinations {
		k.Destinations = append(k.Destinations, d)
	}
	return k
}

// Lookup returns the destination connector of type t.
func (r *Registry) Lookup(t string) (Destination, bool) {
	for _, d := range r.destinations {
		if d.Type() == t {
			return d, true
		}
	}
	return nil, false
}
