package brevo_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/destination"
)

func parseConfig(t *testing.T, mapping string) (*config.Config, error) {
	t.Helper()
	yaml := `store: sqlite://./x.db
syncs:
  - id: s
    source: {type: csv, path: c.csv, identity: id}
    destination: {type: brevo, api_key: k, list_ids: [2]}
    mapping: ` + mapping + "\n"
	return config.Parse(filepath.Join(t.TempDir(), "oncesync.yaml"), []byte(yaml), func(string) (string, bool) { return "", false }, connector.Default().Kinds())
}

// TestAttributeNamesAreSentUpperCase: Brevo names its attributes in upper
// case; a mapping that spells one in lower case writes Brevo's name, and one
// that names an attribute twice is refused.
func TestAttributeNamesAreSentUpperCase(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig(t, `{email: email, attributes: {firstname: first_name, LASTNAME: last_name}}`)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Syncs[0].Destination
	k, ok := connector.Default().Lookup(d.Type)
	if !ok {
		t.Fatal("brevo is not registered")
	}
	dst, spec, err := k.New(d, destination.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dst.Close() })
	if spec.Attributes["FIRSTNAME"] != "first_name" || spec.Attributes["LASTNAME"] != "last_name" || len(spec.Attributes) != 2 {
		t.Errorf("mapped attributes %v, want FIRSTNAME and LASTNAME", spec.Attributes)
	}
	if _, err := parseConfig(t, `{email: email, attributes: {firstname: a, FIRSTNAME: b}}`); err == nil || !strings.Contains(err.Error(), "is the Brevo attribute FIRSTNAME again") {
		t.Errorf("an attribute mapped twice: %v", err)
	}
}

// TestBaseURLOnBrevosHostNeedsV3: Brevo's own host answers every path
// outside /v3 with a 404 that names nothing; validate says where the API
// is. Another host (a fake, a proxy) is taken as given.
func TestBaseURLOnBrevosHostNeedsV3(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ base, want string }{
		{"https://api.brevo.com", "Brevo's API root is https://api.brevo.com/v3"},
		{"https://api.brevo.com/v2", "Brevo's API root is https://api.brevo.com/v3"},
		{"https://api.sendinblue.com/", "Brevo's API root is https://api.sendinblue.com/v3"},
		{"https://api.brevo.com/v3/", ""},
		{"http://127.0.0.1:8080", ""},
	} {
		yaml := "store: sqlite://./x.db\nsyncs:\n  - id: s\n    source: {type: csv, path: c.csv, identity: id}\n" +
			"    destination: {type: brevo, api_key: k, list_ids: [2], base_url: \"" + tc.base + "\"}\n    mapping: {email: email}\n"
		_, err := config.Parse(filepath.Join(t.TempDir(), "oncesync.yaml"), []byte(yaml), func(string) (string, bool) { return "", false }, connector.Default().Kinds())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.base, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a problem saying %q", tc.base, err, tc.want)
		}
	}
}
