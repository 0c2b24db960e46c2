package klaviyo

import (
	"maps"
	"regexp"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/mapping"
)

// Kind is the klaviyo destination's part of the configuration (registered
// in internal/connector): base_url, api_key, revision and list_id under
// destination:, email and attributes under mapping:.
type Kind struct{}

// Config is a sync's klaviyo keys.
type Config struct {
	BaseURL  string
	APIKey   string
	Revision string
	ListID   string
	// Email is the column holding the profile's e-mail address.
	Email string
	// Attributes maps Klaviyo attribute names (first_name, ...,
	// location.city, properties.NAME) to columns.
	Attributes map[string]string
}

// publicKey is the form of a Klaviyo public API key (site ID).
var publicKey = regexp.MustCompile(`^[A-Za-z0-9]{6}$`)

// Lists names the sync's list (config.ListScoper).
func (c *Config) Lists() []string {
	if c.ListID == "" {
		return nil
	}
	return []string{"Klaviyo list " + c.ListID}
}

func (Kind) Type() string                    { return "klaviyo" }
func (Kind) NewSpec() config.DestinationSpec { return &Config{} }
func (Kind) DestinationKeys() []string {
	return []string{"base_url", "api_key", "revision", "list_id"}
}
func (Kind) MappingKeys() []string { return []string{"email", "attributes"} }
func (Kind) SecretKeys() []string  { return []string{"api_key"} }

// WriteModes are the write modes Klaviyo supports (docs/guide.md#write-modes).
func (Kind) WriteModes() []string {
	return []string{config.WriteUpsert, config.WriteUpdate, config.WriteCreate, config.WriteMirror}
}

// New builds a sync's Klaviyo destination and the mapping of its profiles.
func (Kind) New(d config.Destination, o destination.Options) (destination.Destination, mapping.Spec, error) {
	c := d.Spec.(*Config)
	rate := d.RateLimit
	if rate == 0 {
		rate = 1e9 // an explicit 0: no client-side limit (Klaviyo's 429s still apply)
	}
	dst, err := New(Params{
		BaseURL: c.BaseURL, APIKey: c.APIKey, Revision: c.Revision, ListID: c.ListID, Mode: d.Mode,
		WriteMode: destination.WriteMode(d.EffectiveWriteMode()), Concurrency: d.Concurrency, Timeout: d.Timeout,
		RateLimit: rate, HTTPClient: o.HTTPClient, Clock: o.Clock, Sleep: o.Sleep, Accounts: o.Accounts, AccountName: d.Account,
	})
	if err != nil {
		return nil, mapping.Spec{}, err
	}
	return dst, mapping.Spec{Email: c.Email, Attributes: c.Attributes}, nil
}

// PayloadSettings is list_id (config.PayloadSettings) where the bulk
// import jobs add every profile to it (bulk mode, upsert or mirror),
// whatever its mapped values; "" elsewhere, where the list is not written.
func (c *Config) PayloadSettings(d *config.Destination) string {
	wm := d.EffectiveWriteMode()
	if c.ListID == "" || d.Mode == ModeSingle || (wm != config.WriteUpsert && wm != config.WriteMirror) {
		return ""
	}
	return "list_id=" + c.ListID
}

func (c *Config) Decode(key string, _ bool, v config.Value) {
	switch key {
	case "base_url":
		c.BaseURL = v.String()
	case "api_key":
		c.APIKey = v.String()
	case "revision":
		c.Revision = v.String()
	case "list_id":
		c.ListID = v.String()
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
	if !k.Has("destination.revision") {
		c.Revision = DefaultRevision
	}
}

var revisionRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(\.[a-z0-9]+)?$`)

func (c *Config) Check(d *config.Destination, k *config.Checker) {
	if k.Has("destination.base_url") && k.Required("destination.base_url", c.BaseURL, "") {
		k.URL("destination.base_url", c.BaseURL, "http", "https")
		k.APIRoot("destination.base_url", c.BaseURL, "Klaviyo", []string{"klaviyo.com"}, "")
	}
	if k.Required("destination.api_key", c.APIKey, "is required for klaviyo destinations (a private API key: use ${KLAVIYO_KEY})") &&
		publicKey.MatchString(c.APIKey) {
		// The public key (the site ID, six characters) identifies the
		// account to Klaviyo's client APIs; the server API answers it 401.
		k.Report("destination.api_key", "looks like Klaviyo's public API key (the six-character site ID), which the profiles API refuses: create a private API key (Settings > API keys; it starts with pk_) with the profiles, lists and subscriptions scopes")
	}
	if k.Has("destination.revision") && !revisionRE.MatchString(c.Revision) && !k.Bad("destination.revision") {
		k.Report("destination.revision", "must be a Klaviyo API revision like "+DefaultRevision+", got "+k.Show("destination.revision", c.Revision))
	}
	mirror := d.EffectiveWriteMode() == config.WriteMirror
	if c.ListID == "" && !k.Bad("destination.list_id") {
		switch {
		case mirror:
			k.Report("destination.list_id", "is required with write_mode mirror: removed profiles are taken out of this list")
		case d.Mode == config.ModeBulk && d.EffectiveWriteMode() == config.WriteUpsert:
			k.Report("destination.list_id", "is required in bulk mode: Klaviyo's bulk import jobs add the profiles to this list")
		}
	}
	if mirror && d.Mode != config.ModeBulk && !k.Bad("destination.mode") {
		k.Report("destination.mode", "must be bulk with write_mode mirror: only Klaviyo's bulk import jobs add profiles to the list a removal takes them out of")
	}
	k.Required("mapping.email", c.Email, "is required for klaviyo destinations (the column holding the e-mail address)")
	for name, col := range c.Attributes {
		p := k.Key("mapping.attributes", name)
		if prob := AttributeProblem(name); prob != "" {
			k.Report(p, prob)
			continue
		}
		k.Required(p, col, "needs a source column name")
	}
}

func (c *Config) Secrets() []string {
	return append([]string{c.APIKey}, config.URLSecrets(c.BaseURL)...)
}

func (c *Config) Redacted() config.DestinationSpec {
	r := *c
	r.APIKey = ""
	r.BaseURL = config.RedactURL(c.BaseURL)
	r.Attributes = maps.Clone(c.Attributes)
	return &r
}

var definitionOrder = []string{"type", "base_url", "revision", "mode", "write_mode", "list_id", "concurrency", "timeout", "rate_limit"}

func (c *Config) Definition(common []config.Field) (dest, mapping []config.Field) {
	dest = common
	for _, f := range []config.Field{{Key: "base_url", Value: c.BaseURL}, {Key: "revision", Value: c.Revision}, {Key: "list_id", Value: c.ListID}} {
		if f.Value != "" {
			dest = append(dest, f)
		}
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

// Address is base_url and api_key (config.Addresser): another key may be
// another Klaviyo account, which holds none of the sync's profiles.
func (c *Config) Address() (endpoint, credential string) { return c.BaseURL, c.APIKey }
