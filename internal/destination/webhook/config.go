package webhook

import (
	"maps"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/mapping"
)

// Kind is the webhook destination's part of the configuration (registered
// in internal/connector): url, secret and headers under destination:,
// fields under mapping:.
type Kind struct{}

// Config is a sync's webhook keys.
type Config struct {
	// URL is the endpoint.
	URL string
	// Secret signs payloads (a secret: use ${ENV}).
	Secret string
	// Headers are extra request headers; their values are secrets.
	Headers map[string]string
	// Fields maps payload fields to columns; empty sends every column
	// unchanged.
	Fields map[string]string
}

func (Kind) Type() string                    { return "webhook" }
func (Kind) NewSpec() config.DestinationSpec { return &Config{} }
func (Kind) DestinationKeys() []string       { return []string{"url", "secret", "headers"} }
func (Kind) MappingKeys() []string           { return []string{"fields"} }
func (Kind) SecretKeys() []string            { return []string{"secret", "headers"} }

// New builds a sync's webhook destination and the mapping of its payloads.
func (Kind) New(d config.Destination, o destination.Options) (destination.Destination, mapping.Spec, error) {
	c := d.Spec.(*Config)
	dst, err := New(Params{
		URL: c.URL, Mode: d.Mode, Headers: c.Headers, Secret: c.Secret,
		Concurrency: d.Concurrency, Timeout: d.Timeout, HTTPClient: o.HTTPClient, Clock: o.Clock, Sleep: o.Sleep,
	})
	if err != nil {
		return nil, mapping.Spec{}, err
	}
	return dst, mapping.Spec{Fields: c.Fields}, nil
}

func (c *Config) Decode(key string, _ bool, v config.Value) {
	switch key {
	case "url":
		c.URL = v.String()
	case "secret":
		c.Secret = v.String()
	case "headers":
		c.Headers = v.StringMap()
	case "fields":
		c.Fields = v.StringMap()
	}
}

func (c *Config) Defaults(d *config.Destination, k *config.Checker) {
	if !k.Has("destination.mode") {
		d.Mode = config.ModeSingle
	}
}

var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// reservedHeaders are set by oncesync on every call.
var reservedHeaders = map[string]bool{
	"Idempotency-Key":   true,
	"Webhook-Id":        true,
	"Webhook-Timestamp": true,
	"Webhook-Signature": true,
	"Content-Type":      true,
	"Content-Length":    true,
	"Host":              true,
}

func (c *Config) Check(_ *config.Destination, k *config.Checker) {
	if k.Required("destination.url", c.URL, "is required for webhook destinations") {
		k.URL("destination.url", c.URL, "http", "https")
	}
	if _, ok := apiclient.SigningKey(c.Secret); !ok {
		// The run would refuse it (New): validate says so first, without
		// echoing the secret. Dropping the prefix would sign with the text
		// itself, which no Standard Webhooks library verifies.
		k.Report("destination.secret", "has Standard Webhooks' whsec_ prefix but what follows is not base64 (whsec_BASE64): copy the secret as the receiver gives it")
	}
	for name := range c.Headers {
		hp := k.Key("destination.headers", name)
		switch {
		case !headerNameRE.MatchString(name):
			k.Report(hp, "is not a valid HTTP header name")
		case reservedHeaders[textproto.CanonicalMIMEHeaderKey(name)]:
			k.Report(hp, "is set by oncesync and cannot be overridden")
		}
	}
	for name, col := range c.Fields {
		k.Required(k.Key("mapping.fields", name), col, "needs a source column name")
	}
}

func (c *Config) Secrets() []string {
	out := []string{c.Secret}
	for _, v := range c.Headers {
		out = append(out, v)
	}
	out = append(out, pathTokens(c.URL)...)
	return append(out, config.URLSecrets(c.URL)...)
}

// pathTokens are the segments of a webhook URL's path that look like a
// credential (Slack's /services/T0/B0/XXXX, Zapier's /hooks/catch/1/abc):
// 20 or more characters holding both letters and digits, or 32 or more.
func pathTokens(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	for _, seg := range strings.Split(u.Path, "/") {
		letters := strings.IndexFunc(seg, unicode.IsLetter) >= 0
		digits := strings.IndexFunc(seg, unicode.IsDigit) >= 0
		if len(seg) >= 32 || len(seg) >= 20 && letters && digits {
			out = append(out, seg)
		}
	}
	return out
}

// redactPath replaces the path segments pathTokens finds with [redacted].
func redactPath(raw string) string {
	toks := pathTokens(raw)
	if len(toks) == 0 {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	segs := strings.Split(u.Path, "/")
	for i, seg := range segs {
		if slices.Contains(toks, seg) {
			segs[i] = "[redacted]"
		}
	}
	u.Path, u.RawPath = strings.Join(segs, "/"), ""
	return u.String()
}

func (c *Config) Redacted() config.DestinationSpec {
	r := *c
	r.Secret = ""
	r.URL = config.RedactURL(redactPath(c.URL))
	if c.Headers != nil {
		r.Headers = make(map[string]string, len(c.Headers))
		for k := range c.Headers {
			r.Headers[k] = ""
		}
	}
	r.Fields = maps.Clone(c.Fields)
	return &r
}

// Definition puts url and the header names (never their values) after the
// destination's common keys.
func (c *Config) Definition(common []config.Field) (dest, mapping []config.Field) {
	dest = common
	if c.URL != "" {
		dest = append(dest, config.Field{Key: "url", Value: c.URL})
	}
	if len(c.Headers) > 0 {
		names := make([]string, 0, len(c.Headers))
		for k := range c.Headers {
			names = append(names, k)
		}
		sort.Strings(names)
		dest = append(dest, config.Field{Key: "headers", Value: names})
	}
	if len(c.Fields) > 0 {
		mapping = append(mapping, config.Field{Key: "fields", Value: c.Fields})
	}
	return dest, mapping
}

// Address is url (config.Addresser): the secret and headers sign and
// authorise requests to the same receiver.
func (c *Config) Address() (endpoint, credential string) { return c.URL, "" }
