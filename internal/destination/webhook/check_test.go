package webhook_test

import (
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/destination/destinationtest"
	"github.com/oncesync/oncesync/internal/failure"
)

// TestCheck: the connection check connects to the webhook's host and sends
// it nothing; a host that refuses connections is destination_unavailable.
func TestCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, "bulk", destinationtest.Faults{})
	lines, err := b.dest.Check(t.Context())
	if err != nil || len(lines) != 1 || !strings.Contains(lines[0], "accepts connections") || strings.Contains(lines[0], "QUERY-SECRET") {
		t.Fatalf("check: %q, %v", lines, err)
	}
	if n := b.rv.requests.Load(); n != 0 {
		t.Fatalf("the check sent %d requests", n)
	}
	refused := setup(t, "bulk", destinationtest.Faults{Refused: true})
	if _, err := refused.dest.Check(t.Context()); failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("refused host: %v", err)
	}
}
