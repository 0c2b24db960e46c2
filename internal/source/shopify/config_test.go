package shopify_test

import (
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/source/shopify"
)

func parse(t *testing.T, source string) (*config.Config, error) {
	t.Helper()
	yaml := `store: sqlite://./o.db
syncs:
  - id: shop
    source: ` + source + `
    destination: {type: webhook, url: https://example.com/h}
`
	env := func(k string) (string, bool) {
		if k == "SHOPIFY_TOKEN" {
			return "shpat_s3cret_value", true
		}
		return "", false
	}
	return config.Parse("o.yaml", []byte(yaml), env, connector.Default().Kinds())
}

func TestConfigDefaultsAndSecrets(t *testing.T) {
	cfg, err := parse(t, `{type: shopify, shop_url: https://acme.myshopify.com, access_token: "${SHOPIFY_TOKEN}"}`)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Syncs[0].Source
	if s.Identity != "id" || s.PageSize != 250 {
		t.Fatalf("identity %q, page_size %d; want id and 250", s.Identity, s.PageSize)
	}
	def, err := cfg.Syncs[0].DefinitionJSON()
	if err != nil || strings.Contains(def, "shpat_") {
		t.Fatalf("definition %s, %v: the token must not be in it", def, err)
	}
	found := false
	for _, v := range cfg.SecretValues() {
		found = found || v == "shpat_s3cret_value"
	}
	if !found {
		t.Fatal("the access token is not a secret value")
	}
	if c := s.Spec.(*shopify.Config); c.APIVersion != "" || c.ShopURL != "https://acme.myshopify.com" {
		t.Fatalf("spec %+v", c)
	}
}

// TestConfigLookback: cursor_lookback is read, kept in the definition when
// written, and absent from it otherwise (definitions written before it
// existed do not change).
func TestConfigLookback(t *testing.T) {
	cfg, err := parse(t, `{type: shopify, shop_url: https://acme.myshopify.com, access_token: x, cursor_lookback: 30m}`)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Syncs[0].Source.Spec.(*shopify.Config)
	if !c.Lookback.Set || c.Lookback.D.Minutes() != 30 {
		t.Fatalf("lookback %+v", c.Lookback)
	}
	if def, _ := cfg.Syncs[0].DefinitionJSON(); !strings.Contains(def, "cursor_lookback") {
		t.Fatalf("definition %s lacks cursor_lookback", def)
	}
	cfg, err = parse(t, `{type: shopify, shop_url: https://acme.myshopify.com, access_token: x}`)
	if err != nil {
		t.Fatal(err)
	}
	if def, _ := cfg.Syncs[0].DefinitionJSON(); strings.Contains(def, "cursor_lookback") {
		t.Fatalf("definition %s holds an unwritten cursor_lookback", def)
	}
}

func TestConfigProblems(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{`{type: shopify, access_token: x}`, "syncs[0].source.shop_url: is required"},
		{`{type: shopify, shop_url: https://a.myshopify.com}`, "syncs[0].source.access_token: is required"},
		{`{type: shopify, shop_url: http://a.myshopify.com, access_token: x}`, "must be https://"},
		{`{type: shopify, shop_url: https://a.myshopify.com/admin, access_token: x}`, "the shop's address only"},
		{`{type: shopify, shop_url: https://a.myshopify.com, access_token: x, api_version: "2025-13"}`, "source.api_version: must be a Shopify API version"},
		{`{type: shopify, shop_url: https://a.myshopify.com, access_token: x, cursor_lookback: -1m}`, "source.cursor_lookback: must be 0 (off) or a duration"},
		{`{type: shopify, shop_url: https://a.myshopify.com, access_token: x, identity: email}`, "source.identity: must be id"},
		{`{type: shopify, shop_url: https://a.myshopify.com, access_token: x, page_size: 500}`, "source.page_size: must be at most 250"},
		{`{type: shopify, shop_url: https://a.myshopify.com, access_token: x, path: a.csv}`, "source.path: is not used by shopify sources"},
	} {
		_, err := parse(t, tc.source)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.source, err, tc.want)
		}
	}
	if _, err := parse(t, `{type: shopify, shop_url: "http://127.0.0.1:8027", access_token: x}`); err != nil {
		t.Errorf("a fake on this machine: %v", err)
	}
}
