package barrier_test

import (
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/barrier"
)

// TestEvictionAdviceNamesTheGuide: the failure lines of a Redis that may
// evict, or that will not say whether it does, named no section to read;
// every other Redis refusal at start names docs/guide.md#redis-in-production.
func TestEvictionAdviceNamesTheGuide(t *testing.T) {
	for _, a := range []interface{ Advice() string }{
		&barrier.EvictionPolicyError{Addr: "127.0.0.1:6379", Policy: "allkeys-lru"},
		&barrier.PolicyUnreadableError{Addr: "127.0.0.1:6379"},
	} {
		if !strings.Contains(a.Advice(), "(docs/guide.md#redis-in-production)") {
			t.Errorf("%T's advice names no doc anchor: %s", a, a.Advice())
		}
	}
}
