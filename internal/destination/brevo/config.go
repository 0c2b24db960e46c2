package brevo

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/mapping"
)

// Kind is the brevo destination's part of the configuration (registered in
// internal/connector): base_url, api_key and list_ids under destination:,
// email, ext_id and attributes under mapping:.
type Kind struct{}

// Config is a sync's brevo keys.
type Config struct {
	// BaseURL is Brevo's API root (default https://api.brevo.com/v3).
	BaseURL string
	// APIKey is the Brevo API key (a secret: use ${ENV}).
	APIKey string
	// ListIDs are the Brevo lists contacts are added to (needed in bulk mode).
	ListIDs []int64
	// Email is the column holding the contact's e-mail address.
	Email string
	// ExtID is the column written to Brevo's ext_id (optional).
	ExtID string
	// Attributes maps Brevo attribute names to columns.
	Attributes map[string]string
}

func (Kind) Type() string                    { return "brevo" }
func (Kind) NewSpec() config.DestinationSpec { return &Config{} }
func (Kind) DestinationKeys() []string       { return []string{"base_url", "api_key", "list_ids"} }
func (Kind) MappingKeys() []string           { return []string{"email", "ext_id", "attributes"} }
func (Kind) SecretKeys() []string            { return []string{"api_key"} }

// unlimitedRate stands for "no client-side limit" (requests per second).
const unlimitedRate = 1e9

// New builds a sync's Brevo destination and the mapping of its contacts.
func (Kind) New(d config.Destination, o destination.Options) (destination.Destination, mapping.Spec, error) {
	c := d.Spec.(*Config)
	rate := d.RateLimit
	if rate == 0 {
		// An absent rate_limit defaults to Brevo's 10/s; an explicit 0 means
		// no client-side limit (Brevo's headers still apply).
		rate = unlimitedRate
	}
	attrs := upperNames(c.Attributes)
	dst, err := New(Params{
		BaseURL: c.BaseURL, APIKey: c.APIKey, Mode: d.Mode, ListIDs: c.ListIDs,
		Concurrency: d.Concurrency, Timeout: d.Timeout, RateLimit: rate,
		HTTPClient: o.HTTPClient, Clock: o.Clock, Sleep: o.Sleep,
		WriteMode: destination.WriteMode(d.EffectiveWriteMode()), Accounts: o.Accounts, AccountName: d.Account,
		Attributes: slices.Collect(maps.Keys(attrs)),
	})
	if err != nil {
		return nil, mapping.Spec{}, err
	}
	return dst, mapping.Spec{Email: c.Email, ExtID: c.ExtID, Attributes: attrs}, nil
}

// upperNames is attrs keyed by upper-case names: Brevo's attribute names are
// upper-case ("The attribute's parameter should be passed in capital
// letter"), so a mapping that spells one in lower case is sent as Brevo
// names it (docs/config.md#mapping).
func upperNames(attrs map[string]string) map[string]string {
	if attrs == nil {
		return nil
	}
	out := make(map[string]string, len(attrs))
	for name, col := range attrs {
		out[strings.ToUpper(name)] = col
	}
	return out
}

// PayloadSettings is list_ids, sorted, and how an empty value is written
// (config.PayloadSettings): every contact is added to those lists, whatever
// its mapped values, on every path and in every write mode, and an empty
// value erases the attribute (docs/guide.md#a-value-cleared-in-the-source).
// A sync that ran before empty values were erased sends every record once
// more, so that what it cleared then is erased too.
func (c *Config) PayloadSettings(*config.Destination) string {
	const empty = "empty=erase"
	if len(c.ListIDs) == 0 {
		return empty
	}
	ids := slices.Clone(c.ListIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return "list_ids=" + strings.Join(s, ",") + ";" + empty
}

func (c *Config) Decode(key string, _ bool, v config.Value) {
	switch key {
	case "base_url":
		c.BaseURL = v.String()
	case "api_key":
		c.APIKey = v.String()
	case "list_ids":
		c.ListIDs = v.Int64List()
	case "email":
		c.Email = v.String()
	case "ext_id":
		c.ExtID = v.String()
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
}

// Lists names the sync's lists (config.ListScoper).
func (c *Config) Lists() []string {
	out := make([]string, len(c.ListIDs))
	for i, id := range c.ListIDs {
		out[i] = "Brevo list " + strconv.FormatInt(id, 10)
	}
	return out
}

func (c *Config) Check(d *config.Destination, k *config.Checker) {
	if k.Has("destination.base_url") && k.Required("destination.base_url", c.BaseURL, "") {
		k.URL("destination.base_url", c.BaseURL, "http", "https")
		k.APIRoot("destination.base_url", c.BaseURL, "Brevo", []string{"brevo.com", "sendinblue.com"}, "/v3")
	}
	if k.Required("destination.api_key", c.APIKey, "is required for brevo destinations") && strings.HasPrefix(c.APIKey, "xsmtpsib-") {
		// Brevo's SMTP keys authenticate its SMTP relay only; every API
		// call answers 401 "Key not found", which reads as a revoked key.
		k.Report("destination.api_key", "is a Brevo SMTP key (xsmtpsib-...), which the API refuses: create an API key under SMTP & API > API Keys (it starts with xkeysib-)")
	}
	if d.WriteMode == config.WriteMirror && len(c.ListIDs) == 0 && !k.Bad("destination.list_ids") {
		k.Report("destination.list_ids", "is required with write_mode mirror: a removed record is taken off the sync's lists")
	}
	if d.Mode == config.ModeBulk && len(c.ListIDs) == 0 && !k.Bad("destination.list_ids") {
		k.Report("destination.list_ids", "is required in bulk mode: Brevo's contact import needs at least one list id")
	}
	for i, id := range c.ListIDs {
		ip := "destination.list_ids[" + strconv.Itoa(i) + "]"
		if id <= 0 && !k.Bad(ip) {
			k.Report(ip, "must be a positive Brevo list id, got "+strconv.FormatInt(id, 10))
		}
	}
	k.Required("mapping.email", c.Email, "is required for brevo destinations (the column holding the e-mail address)")
	if c.ExtID != "" {
		// Brevo's imports carry ext_id as the EXT_ID attribute: both mapped
		// would send one field twice, with two values.
		for name := range c.Attributes {
			if strings.EqualFold(name, "EXT_ID") {
				k.Report(k.Key("mapping.attributes", name), "maps Brevo's EXT_ID, which mapping.ext_id already writes; keep one of them")
			}
		}
	}
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.Attributes)) {
		k.Required(k.Key("mapping.attributes", name), c.Attributes[name], "needs a source column name")
		if other, dup := seen[strings.ToUpper(name)]; dup {
			k.Report(k.Key("mapping.attributes", name), "is the Brevo attribute "+strings.ToUpper(name)+" again ("+other+"): Brevo's attribute names are upper-case, so keep one of them")
		}
		seen[strings.ToUpper(name)] = name
	}
	if k.Has("mapping.ext_id") && !k.Bad("mapping.ext_id") {
		k.Required("mapping.ext_id", c.ExtID, "needs a source column name")
	}
}

func (c *Config) Secrets() []string {
	return append([]string{c.APIKey}, config.URLSecrets(c.BaseURL)...)
}

func (c *Config) Redacted() config.DestinationSpec {
	r := *c
	r.APIKey = ""
	r.BaseURL = config.RedactURL(c.BaseURL)
	r.ListIDs = slices.Clone(c.ListIDs)
	r.Attributes = maps.Clone(c.Attributes)
	return &r
}

// definitionOrder is the order of the destination's keys in definitions
// stored since the first release.
var definitionOrder = []string{"type", "base_url", "mode", "list_ids", "concurrency", "timeout", "rate_limit"}

func (c *Config) Definition(common []config.Field) (dest, mapping []config.Field) {
	dest = common
	if c.BaseURL != "" {
		dest = append(dest, config.Field{Key: "base_url", Value: c.BaseURL})
	}
	if len(c.ListIDs) > 0 {
		dest = append(dest, config.Field{Key: "list_ids", Value: c.ListIDs})
	}
	dest = config.InOrder(definitionOrder, dest)
	if c.Email != "" {
		mapping = append(mapping, config.Field{Key: "email", Value: c.Email})
	}
	if c.ExtID != "" {
		mapping = append(mapping, config.Field{Key: "ext_id", Value: c.ExtID})
	}
	if len(c.Attributes) > 0 {
		mapping = append(mapping, config.Field{Key: "attributes", Value: c.Attributes})
	}
	return dest, mapping
}

// WriteModes are the write modes Brevo supports (docs/guide.md#write-modes).
func (Kind) WriteModes() []string {
	return []string{config.WriteUpsert, config.WriteUpdate, config.WriteCreate, config.WriteMirror}
}

// Address is base_url and api_key (config.Addresser): another key may be
// another Brevo account, which holds none of the sync's contacts.
func (c *Config) Address() (endpoint, credential string) { return c.BaseURL, c.APIKey }
