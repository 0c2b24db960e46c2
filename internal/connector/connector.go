// Package connector is the registry of destination connectors: each
// connector package describes itself (its config keys, checks, secrets and
// constructor, as a Destination) and is listed here, in one line. config
// decodes a sync's destination with Kinds; app builds it with Lookup.
package connector

import (
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/mapping"
)

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
	destinations []Destination
}

// Default is the registry of every connector the product ships.
func Default() *Registry {
	return New(
		brevo.Kind{},
		webhook.Kind{},
	)
}

// New is a registry of ds (a test adds its own connector to Default's with
// New(append(Default().Destinations(), mine)...)).
func New(ds ...Destination) *Registry { return &Registry{destinations: ds} }

// Destinations are the registered destinations, in registration order.
func (r *Registry) Destinations() []Destination { return append([]Destination(nil), r.destinations...) }

// Kinds is what config.Load needs of the registry.
func (r *Registry) Kinds() config.Kinds {
	k := config.Kinds{}
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
