package webhook_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/destination/webhook"
)

// TestPathTokenRedacted: a credential in a webhook URL's path (Slack's
// incoming webhooks) is kept out of the stored definition and is a secret
// for log scrubbing; ordinary path words stay.
func TestPathTokenRedacted(t *testing.T) {
	t.Parallel()
	const tok = "hR9xkQ2mZ7vW4pL8nB3cY6tJ"
	c := &webhook.Config{URL: "https://hooks.slack.com/services/T0ABC1234/B0DEF5678/" + tok + "?x=1"}
	r := c.Redacted().(*webhook.Config)
	if strings.Contains(r.URL, tok) || !strings.Contains(r.URL, "hooks.slack.com/services/") || !strings.Contains(r.URL, "redacted") {
		t.Fatalf("redacted URL %q", r.URL)
	}
	if !slices.Contains(c.Secrets(), tok) {
		t.Fatalf("secrets %q lack the path token", c.Secrets())
	}
	plain := &webhook.Config{URL: "https://example.com/hooks/events"}
	if got := plain.Redacted().(*webhook.Config).URL; got != plain.URL {
		t.Fatalf("a URL without a token changed: %q", got)
	}
}

// TestWhsecSecretChecked: a secret with Standard Webhooks' whsec_ prefix
// that is not base64 is named by validate (a run would refuse it), and
// the message does not show it.
func TestWhsecSecretChecked(t *testing.T) {
	t.Parallel()
	parse := func(secret string) error {
		yaml := `store: sqlite://./x.db
syncs:
  - id: s
    source: {type: csv, path: c.csv, identity: id}
    destination: {type: webhook, url: "https://example.com/hook", secret: "` + secret + `"}
`
		_, err := config.Parse(filepath.Join(t.TempDir(), "oncesync.yaml"), []byte(yaml), func(string) (string, bool) { return "", false }, connector.Default().Kinds())
		return err
	}
	const bad = "whsec_not!base64-s3cret"
	err := parse(bad)
	if err == nil || !strings.Contains(err.Error(), "destination.secret: has Standard Webhooks' whsec_ prefix") {
		t.Fatalf("whsec_ secret not base64: %v", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the problem shows the secret: %v", err)
	}
	// Unpadded base64, as the official libraries take it, is a secret too.
	for _, ok := range []string{"whsec_c2lnbmluZy1zZWNyZXQ=", "whsec_c2lnbmluZy1zZWNyZXQ", "plain-text-secret"} {
		if err := parse(ok); err != nil {
			t.Errorf("secret %q: %v", ok, err)
		}
	}
}
