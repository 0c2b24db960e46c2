package hubspot_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/destination/hubspot"
)

func parse(t *testing.T, dest, mapping string) (*config.Config, error) {
	t.Helper()
	yaml := `store: sqlite://./x.db
syncs:
  - id: s
    source: {type: csv, path: c.csv, identity: id}
    destination: ` + dest + `
    mapping: ` + mapping + "\n"
	env := func(k string) (string, bool) {
		if k == "HUBSPOT_TOKEN" {
			return "pat-na1-config-s3cret", true
		}
		return "", false
	}
	return config.Parse(filepath.Join(t.TempDir(), "oncesync.yaml"), []byte(yaml), env, connector.Default().Kinds())
}

func TestConfigDefaultsAndSecrets(t *testing.T) {
	t.Parallel()
	cfg, err := parse(t, `{type: hubspot, token: "${HUBSPOT_TOKEN}", write_mode: mirror}`, `{email: email, attributes: {firstname: first}}`)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Syncs[0].Destination
	c := d.Spec.(*hubspot.Config)
	if d.Mode != "bulk" || d.RateLimit != hubspot.DefaultRateLimit || c.BaseURL != hubspot.DefaultBaseURL || c.IDProperty != "email" || d.WriteMode != "mirror" {
		t.Errorf("defaults: mode %q rate %v base %q id_property %q write_mode %q", d.Mode, d.RateLimit, c.BaseURL, c.IDProperty, d.WriteMode)
	}
	if !slices.Contains(cfg.SecretValues(), "pat-na1-config-s3cret") {
		t.Error("the token is not a secret value")
	}
	def, err := cfg.Syncs[0].DefinitionJSON()
	if err != nil || strings.Contains(def, "s3cret") || !strings.Contains(def, `"id_property":"email"`) {
		t.Errorf("definition %s, %v: want id_property and no token", def, err)
	}
	if r := c.Redacted().(*hubspot.Config); r.Token != "" || r.Attributes["firstname"] != "first" {
		t.Errorf("redacted %+v", r)
	}
}

func TestConfigProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dest, mapping, want string }{
		{`{type: hubspot}`, `{email: email}`, "destination.token: is required for hubspot destinations"},
		{`{type: hubspot, token: x}`, `{attributes: {firstname: f}}`, "mapping.email: is required for hubspot destinations identified by email"},
		{`{type: hubspot, token: x, id_property: customer_id}`, `{email: email}`, "destination.id_property: names \"customer_id\", which mapping.attributes does not map"},
		{`{type: hubspot, token: x}`, `{email: email, attributes: {FIRSTNAME: f}}`, "is not a HubSpot property internal name"},
		{`{type: hubspot, token: x}`, `{email: email, attributes: {email: e}}`, "use mapping.email"},
		{`{type: hubspot, token: x, base_url: "ftp://x"}`, `{email: email}`, "destination.base_url"},
		{`{type: hubspot, token: x, list_ids: [2]}`, `{email: email}`, "destination.list_ids: is not used by hubspot destinations"},
		{`{type: hubspot, token: x, base_url: "https://api.hubapi.com/crm/v3/"}`, `{email: email}`, "destination.base_url: HubSpot's API root is https://api.hubapi.com (its paths are added to it)"},
		// A retired API key (2022) answers 401 as a bearer token.
		{`{type: hubspot, token: "1a2b3c4d-0000-4e5f-8a9b-0123456789ab"}`, `{email: email}`, "destination.token: looks like a HubSpot API key (a UUID), which HubSpot retired in 2022"},
	} {
		_, err := parse(t, tc.dest, tc.mapping)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.dest, tc.mapping, err, tc.want)
		}
	}
	// A custom id property mapped in attributes needs no e-mail.
	if _, err := parse(t, `{type: hubspot, token: x, id_property: customer_id}`, `{attributes: {customer_id: id}}`); err != nil {
		t.Errorf("custom id_property: %v", err)
	}
}
