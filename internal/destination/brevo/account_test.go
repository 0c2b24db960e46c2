package brevo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// AccountID names the account, not the key: a rotated key of the same
// account gives the same id, another account another.
func TestAccountIDNamesTheAccount(t *testing.T) {
	ctx := context.Background()
	const rotated = "xkeysib-rotated"
	b := setup(t, fakebrevo.Options{OtherAPIKeys: []string{rotated}})
	first, err := b.dest.AccountID(ctx)
	if err != nil || !strings.HasPrefix(first, "brevo login ") {
		t.Fatalf("AccountID: %q, %v; want the account's login", first, err)
	}
	p := b.params
	p.APIKey = rotated
	if again, err := b.newDest(t, p).AccountID(ctx); err != nil || again != first {
		t.Fatalf("AccountID with the rotated key: %q, %v; want %q", again, err, first)
	}
	other, err := setup(t, fakebrevo.Options{}).dest.AccountID(ctx)
	if err != nil || other == first {
		t.Fatalf("AccountID of another account: %q, %v; want another than %q", other, err, first)
	}
}
