package klaviyo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// AccountID names the account, not the key; a key without the
// accounts:read scope gets ErrNoAccountID, not a failure.
func TestAccountIDNamesTheAccount(t *testing.T) {
	ctx := context.Background()
	const rotated = "pk_rotated"
	b := setup(t, fakeklaviyo.Options{OtherAPIKeys: []string{rotated}, AccountID: "AbC123"}, klaviyo.Params{Mode: klaviyo.ModeSingle})
	first, err := b.dest.AccountID(ctx)
	if err != nil || first != "klaviyo account AbC123" {
		t.Fatalf("AccountID: %q, %v; want klaviyo account AbC123", first, err)
	}
	again := setup(t, fakeklaviyo.Options{OtherAPIKeys: []string{rotated}, AccountID: "AbC123"}, klaviyo.Params{Mode: klaviyo.ModeSingle, APIKey: rotated})
	if id, err := again.dest.AccountID(ctx); err != nil || id != first {
		t.Fatalf("AccountID with the rotated key: %q, %v; want %q", id, err, first)
	}
	other, err := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeSingle}).dest.AccountID(ctx)
	if err != nil || other == first {
		t.Fatalf("AccountID of another account: %q, %v; want another than %q", other, err, first)
	}
	scoped := setup(t, fakeklaviyo.Options{NoAccountsScope: true}, klaviyo.Params{Mode: klaviyo.ModeSingle})
	if id, err := scoped.dest.AccountID(ctx); !errors.Is(err, destination.ErrNoAccountID) {
		t.Fatalf("AccountID of a key without accounts:read: %q, %v; want ErrNoAccountID", id, err)
	}
}
