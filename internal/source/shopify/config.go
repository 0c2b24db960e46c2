package shopify

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/source"
)

// Kind is the shopify source's part of the configuration: shop_url,
// access_token and api_version under source:.
type Kind struct{}

// Config is a sync's shopify keys.
type Config struct {
	ShopURL     string
	AccessToken string
	APIVersion  string
	// Lookback is cursor_lookback (DefaultLookback when not set; 0 is none).
	Lookback config.OptionalDuration
}

func (Kind) Type() string               { return "shopify" }
func (Kind) NewSpec() config.SourceSpec { return &Config{} }
func (Kind) SourceKeys() []string {
	return []string{"shop_url", "access_token", "api_version", "cursor_lookback"}
}
func (Kind) SecretKeys() []string { return []string{"access_token"} }

// New builds a sync's shopify source (nothing is requested yet).
func (Kind) New(_ context.Context, s config.Source, _ string) (source.Source, error) {
	c := s.Spec.(*Config)
	lookback := c.Lookback.Or(DefaultLookback)
	if lookback == 0 {
		lookback = -1 // cursor_lookback: 0 is none
	}
	return New(Params{ShopURL: c.ShopURL, Token: c.AccessToken, APIVersion: c.APIVersion, Identity: s.Identity,
		MaxRecordBytes: s.MaxRecordBytes, Lookback: lookback})
}

func (c *Config) Decode(key string, v config.Value) {
	switch key {
	case "shop_url":
		c.ShopURL = v.String()
	case "access_token":
		c.AccessToken = v.String()
	case "api_version":
		c.APIVersion = v.String()
	case "cursor_lookback":
		c.Lookback.Decode(v)
	}
}

// Check reports the keys' problems. It also gives the common keys their
// shopify defaults, as it is the kind's one hook on them: identity id (the
// customer id; re-reads go by it) and page_size 250 (Shopify's largest
// page) when page_size is not set.
func (c *Config) Check(s *config.Source, k *config.Checker) {
	if k.Required("source.shop_url", c.ShopURL, "is required for shopify sources (https://NAME.myshopify.com)") {
		if msg := checkShopURL(c.ShopURL); msg != "" {
			k.Report("source.shop_url", msg)
		}
	}
	k.Required("source.access_token", c.AccessToken, "is required for shopify sources (an Admin API access token, e.g. ${SHOPIFY_TOKEN})")
	if k.Has("source.api_version") && !versionRE.MatchString(c.APIVersion) {
		k.Report("source.api_version", "must be a Shopify API version like "+DefaultAPIVersion+" (YYYY-01, -04, -07 or -10) or unstable, got "+k.Show("source.api_version", c.APIVersion))
	}
	if c.Lookback.Set && c.Lookback.D < 0 {
		k.Report("source.cursor_lookback", "must be 0 (off) or a duration like 15m, got "+c.Lookback.String())
	}
	switch strings.TrimSpace(s.Identity) {
	case "":
		s.Identity = "id"
	case "id":
	default:
		k.Report("source.identity", "must be id for shopify sources (customers are re-read by their id), got "+k.Show("source.identity", s.Identity))
	}
	if !k.Has("source.page_size") {
		s.PageSize = MaxPageSize
	} else if s.PageSize > MaxPageSize {
		k.Report("source.page_size", "must be at most 250 for shopify sources (Shopify's largest page)")
	}
}

// checkShopURL wants https, or http to this machine (a fake): the token
// must not cross a network in clear.
func checkShopURL(raw string) string {
	if msg := config.CheckURL(raw, "https", "http"); msg != "" {
		return msg
	}
	u, _ := url.Parse(strings.TrimSpace(raw))
	if u.User != nil || u.RawQuery != "" || (u.Path != "" && u.Path != "/") {
		return "must be the shop's address only, like https://NAME.myshopify.com"
	}
	if u.Scheme == "http" {
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "must be https:// (http:// only to this machine, for a fake): the access token must not travel in clear"
		}
	}
	return ""
}

// DescribeCursor says where a saved cursor is.
func (c *Config) DescribeCursor(_ *config.Source, cursor string) string {
	if cursor == "" {
		return "start of the shop's customers"
	}
	p, err := parseCursor(cursor)
	if err != nil {
		return "a cursor this oncesync cannot read"
	}
	switch {
	case p.After == "" && p.Settled:
		return "customers updated after " + human(p.Floor)
	case p.After == "" && p.Floor != "":
		return "customers updated from " + human(p.Floor) + " on"
	case p.Floor != "":
		return "in the customers updated from " + human(p.Floor) + ", after one updated " + human(p.Last)
	case p.Last != "":
		return "after a customer updated " + human(p.Last)
	}
	return "start of the shop's customers"
}

func human(t string) string {
	tm, err := time.Parse(time.RFC3339, t)
	if err != nil {
		return t
	}
	return tm.UTC().Format("2006-01-02 15:04:05 UTC")
}

func (c *Config) Secrets() []string { return []string{c.AccessToken} }

func (c *Config) Redacted() config.SourceSpec {
	r := *c
	r.AccessToken = ""
	return &r
}

// Definition puts its keys after the common ones; the token is not part
// of it.
func (c *Config) Definition(common []config.Field) []config.Field {
	out := common
	for _, f := range []config.Field{{Key: "shop_url", Value: c.ShopURL}, {Key: "api_version", Value: c.APIVersion},
		{Key: "cursor_lookback", Value: c.Lookback.String()}} {
		if f.Value != "" {
			out = append(out, f)
		}
	}
	return out
}
