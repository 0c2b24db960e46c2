package hubspot_test

import (
	"context"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/destination/hubspot"
	"github.com/oncesync/oncesync/internal/fakehubspot"
)

// AccountID names the portal, not the token: a rotated token of the same
// account gives the same id, another account another.
func TestAccountIDNamesThePortal(t *testing.T) {
	ctx := context.Background()
	const rotated = "pat-rotated"
	b := setup(t, fakehubspot.Options{OtherTokens: []string{rotated}, PortalID: 4242}, nil)
	first, err := b.dest.AccountID(ctx)
	if err != nil || first != "hubspot portal 4242" {
		t.Fatalf("AccountID: %q, %v; want hubspot portal 4242", first, err)
	}
	again := setup(t, fakehubspot.Options{Token: rotated, OtherTokens: []string{"x"}, PortalID: 4242}, func(p *hubspot.Params) { p.Token = rotated })
	if id, err := again.dest.AccountID(ctx); err != nil || id != first {
		t.Fatalf("AccountID with the rotated token: %q, %v; want %q", id, err, first)
	}
	other, err := setup(t, fakehubspot.Options{}, nil).dest.AccountID(ctx)
	if err != nil || other == first || !strings.HasPrefix(other, "hubspot portal ") {
		t.Fatalf("AccountID of another account: %q, %v; want another portal than %q", other, err, first)
	}
}
