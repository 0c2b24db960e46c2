package brevo_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// accountsSeen is an AccountPacer that books nothing and records the
// accounts it is asked about.
type accountsSeen struct {
	mu       sync.Mutex
	accounts []string
}

func (a *accountsSeen) Reserve(_ context.Context, account string, _ destination.Limit) (time.Duration, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.accounts, account) {
		a.accounts = append(a.accounts, account)
	}
	return 0, nil
}

func (a *accountsSeen) Pause(context.Context, string, time.Duration) error { return nil }

// TestRotatedKeySharesTheNamedAccountsBudget: two keys of one account in
// use at once (a rotation rolled out sync by sync) are one budget when the
// syncs name the same `account` (they were paced as two accounts, and the
// account got twice its rate: 24 % of the requests answered 429); without
// a name, two keys are two budgets.
func TestRotatedKeySharesTheNamedAccountsBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{})
	for _, tc := range []struct {
		name  string
		names [2]string
		want  int
	}{
		{"named alike", [2]string{"acme", "acme"}, 1},
		{"unnamed", [2]string{"", ""}, 2},
		{"named apart", [2]string{"acme", "other"}, 2},
	} {
		seen := &accountsSeen{}
		for i, key := range []string{"key-one", "key-two"} {
			d := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: key, Mode: brevo.ModeSingle, Clock: b.clock, Sleep: b.sleeps.sleep,
				Accounts: seen, AccountName: tc.names[i]})
			_, _ = d.Write(t.Context(), recs(1)) // the fake refuses key-two; the request is paced all the same
		}
		if len(seen.accounts) != tc.want {
			t.Errorf("%s: the contacts requests of two keys were paced under %d budget(s) %v, want %d", tc.name, len(seen.accounts), seen.accounts, tc.want)
		}
	}
}
