package hubspot

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/mapping"
)

// Kind is the hubspot destination's part of the configuration (registered
// in internal/connector): base_url, token and id_property under
// destination:, email and attributes under mapping:.
type Kind struct{}

// Config is a sync's hubspot keys.
type Config struct {
	// BaseURL is HubSpot's API root (default https://api.hubapi.com).
	BaseURL string
	// Token is the private app's access token (a secret: use ${ENV}).
	Token string
	// IDProperty identifies contacts: email (default) or a custom property
	// with unique values, mapped in Attributes.
	IDProperty string
	// Email is the column holding the contact's e-mail address.
	Email string
	// Attributes maps HubSpot property internal names to columns.
	Attributes map[string]string
}

func (Kind) Type() string                    { return "hubspot" }
func (Kind) NewSpec() config.DestinationSpec { return &Config{} }
func (Kind) DestinationKeys() []string       { return []string{"base_url", "token", "id_property"} }
func (Kind) MappingKeys() []string           { return []string{"email", "attributes"} }
func (Kind) SecretKeys() []string            { return []string{"token"} }

// WriteModes are the write modes HubSpot supports (docs/guide.md#write-modes).
func (Kind) WriteModes() []string {
	return []string{config.WriteUpsert, config.WriteUpdate, config.WriteCreate, config.WriteMirror}
}

// unlimitedRate stands for "no client-side limit" (requests per second).
const unlimitedRate = 1e9

// New builds a sync's HubSpot destination and the mapping of its contacts.
func (Kind) New(d config.Destination, o destination.Options) (destination.Destination, mapping.Spec, error) {
	c := d.Spec.(*Config)
	rate := d.RateLimit
	if rate == 0 {
		// An explicit 0 means no client-side limit (HubSpot's 429s still apply).
		rate = unlimitedRate
	}
	props := slices.Sorted(maps.Keys(c.Attributes))
	dst, err := New(Params{
		BaseURL: c.BaseURL, Token: c.Token, IDProperty: c.IDProperty, Properties: props,
		Mode: d.Mode, WriteMode: d.EffectiveWriteMode(), Concurrency: d.Concurrency, Timeout: d.Timeout, RateLimit: rate,
		HTTPClient: o.HTTPClient, Clock: o.Clock, Sleep: o.Sleep, Accounts: o.Accounts, AccountName: d.Account,
	})
	if err != nil {
		return nil, mapping.Spec{}, err
	}
	return dst, mapping.Spec{Email: c.Email, Attributes: c.Attributes}, nil
}

// PayloadSettings says how a null is written (config.PayloadSettings): as
// "", which clears the property (docs/guide.md#a-value-cleared-in-the-source).
// A sync that ran before nulls were sent sends every record once more, so
// that what it cleared then is cleared too.
func (c *Config) PayloadSettings(*config.Destination) string { return "null=clear" }

func (c *Config) Decode(key string, _ bool, v config.Value) {
	switch key {
	case "base_url":
		c.BaseURL = v.String()
	case "token":
		c.Token = v.String()
	case "id_property":
		c.IDProperty = v.String()
	case "email":
		c.Email = v.String()
	case "attributes":
		c.Attributes = v.StringMap()
	}
}

func (c *Config) Defaults(d *config.Destination, k *config.Checker) {
	if !k.Has("destination.mode") {
		d.Mode = config.ModeBulk
	}
	if !k.Has("destination.rate_limit") {
		d.RateLimit = DefaultRateLimit
	}
	if !k.Has("destination.base_url") {
		c.BaseURL = DefaultBaseURL
	}
	if !k.Has("destination.id_property") {
		c.IDProperty = DefaultIDProperty
	}
}

func (c *Config) Check(d *config.Destination, k *config.Checker) {
	if k.Has("destination.base_url") && k.Required("destination.base_url", c.BaseURL, "") {
		k.URL("destination.base_url", c.BaseURL, "http", "https")
		k.APIRoot("destination.base_url", c.BaseURL, "HubSpot", []string{"hubapi.com", "hubspot.com"}, "")
	}
	if k.Required("destination.token", c.Token, "is required for hubspot destinations (a private app's access token)"+k.EmptyHint("destination.token")) &&
		legacyAPIKey.MatchString(c.Token) {
		// HubSpot retired its API keys (a UUID, sent as ?hapikey=) on
		// 2022-11-30: as a bearer token one answers 401 on every call,
		// which reads as a revoked token.
		k.Report("destination.token", "looks like a HubSpot API key (a UUID), which HubSpot retired in 2022: create a private app (Settings > Integrations > Private Apps) with the scopes crm.objects.contacts.read and crm.objects.contacts.write, and use its access token (pat-...)")
	}
	if k.Has("destination.id_property") && k.Required("destination.id_property", c.IDProperty, "") && c.IDProperty != "email" {
		if _, ok := c.Attributes[c.IDProperty]; !ok {
			k.Report("destination.id_property", "names "+k.Show("destination.id_property", c.IDProperty)+
				", which mapping.attributes does not map: each contact needs its value")
		}
	}
	if c.IDProperty == "" || c.IDProperty == "email" {
		k.Required("mapping.email", c.Email, "is required for hubspot destinations identified by email (the column holding the e-mail address)")
	}
	for name, col := range c.Attributes {
		k.Required(k.Key("mapping.attributes", name), col, "needs a source column name")
		switch {
		case name == "email":
			k.Report(k.Key("mapping.attributes", name), "maps HubSpot's email, which mapping.email writes; use mapping.email")
		case name != strings.ToLower(name):
			k.Report(k.Key("mapping.attributes", name), "is not a HubSpot property internal name (those are lower case, e.g. firstname)")
		}
	}
}

func (c *Config) Secrets() []string {
	return append([]string{c.Token}, config.URLSecrets(c.BaseURL)...)
}

func (c *Config) Redacted() config.DestinationSpec {
	r := *c
	r.Token = ""
	r.BaseURL = config.RedactURL(c.BaseURL)
	r.Attributes = maps.Clone(c.Attributes)
	return &r
}

var definitionOrder = []string{"type", "base_url", "id_property", "mode", "write_mode", "concurrency", "timeout", "rate_limit"}

func (c *Config) Definition(common []config.Field) (dest, mapping []config.Field) {
	dest = common
	if c.BaseURL != "" {
		dest = append(dest, config.Field{Key: "base_url", Value: c.BaseURL})
	}
	if c.IDProperty != "" {
		dest = append(dest, config.Field{Key: "id_property", Value: c.IDProperty})
	}
	dest = config.InOrder(definitionOrder, dest)
	if c.Email != "" {
		mapping = append(mapping, config.Field{Key: "email", Value: c.Email})
	}
	if len(c.Attributes) > 0 {
		mapping = append(mapping, config.Field{Key: "attributes", Value: c.Attributes})
	}
	return dest, mapping
}

// legacyAPIKey is the form of HubSpot's retired API keys.
var legacyAPIKey = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Address is base_url and token (config.Addresser): another token may be
// another HubSpot account, which holds none of the sync's contacts.
func (c *Config) Address() (endpoint, credential string) { return c.BaseURL, c.Token }
