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
