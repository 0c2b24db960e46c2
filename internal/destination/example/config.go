package example

import (
	"maps"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/mapping"
)

// Kind is the example destination's part of the configuration: url and
// token under destination:, fields under mapping:.
type Kind struct{}

// Config is a sync's example keys.
type Config struct {
	URL, Token string
	Fields     map[string]string
}

func (Kind) Type() string                    { return "example" }
func (Kind) NewSpec() config.DestinationSpec { return &Config{} }
func (Kind) DestinationKeys() []string       { return []string{"url", "token"} }
func (Kind) MappingKeys() []string           { return []string{"fields"} }
func (Kind) SecretKeys() []string            { return []string{"token"} }

// New builds a sync's example destination.
func (Kind) New(d config.Destination, o destination.Options) (destination.Destination, mapping.Spec, error) {
	c := d.Spec.(*Config)
	dst, err := New(Params{URL: c.URL, Token: c.Token, Concurrency: d.Concurrency, Timeout: d.Timeout,
		HTTPClient: o.HTTPClient, Clock: o.Clock, Sleep: o.Sleep})
	if err != nil {
		return nil, mapping.Spec{}, err
	}
	return dst, mapping.Spec{Fields: c.Fields}, nil
}

func (c *Config) Decode(key string, _ bool, v config.Value) {
	switch key {
	case "url":
		c.URL = v.String()
	case "token":
		c.Token = v.String()
	case "fields":
		c.Fields = v.StringMap()
	}
}

func (c *Config) Defaults(d *config.Destination, k *config.Checker) {
	if !k.Has("destination.mode") {
		d.Mode = config.ModeSingle
	}
}

func (c *Config) Check(d *config.Destination, k *config.Checker) {
	if k.Required("destination.url", c.URL, "is required for example destinations") {
		k.URL("destination.url", c.URL, "http", "https")
	}
	k.Required("destination.token", c.Token, "is required for example destinations")
	if d.Mode != config.ModeSingle && !k.Bad("destination.mode") {
		k.Report("destination.mode", "must be single: the example store takes one record per request")
	}
}

func (c *Config) Secrets() []string { return append([]string{c.Token}, config.URLSecrets(c.URL)...) }

func (c *Config) Redacted() config.DestinationSpec {
	return &Config{URL: config.RedactURL(c.URL), Fields: maps.Clone(c.Fields)}
}

func (c *Config) Definition(common []config.Field) (dest, mapping []config.Field) {
	dest = append(common, config.Field{Key: "url", Value: c.URL})
	if len(c.Fields) > 0 {
		mapping = []config.Field{{Key: "fields", Value: c.Fields}}
	}
	return dest, mapping
}
