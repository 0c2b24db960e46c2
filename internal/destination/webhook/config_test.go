package webhook_test

import (
	"slices"
	"strings"
	"testing"

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
