package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// SessionsOpenFunc returns a new, empty store private to t (closed by
// t.Cleanup) that reads the time from clk.
type SessionsOpenFunc func(t *testing.T, clk *clock.Fake) store.Sessions

// SessionSuite is the acceptance suite of store.Sessions: create, read,
// touch, expiry, sign out one and every session of a user, prune.
func SessionSuite(t *testing.T, open SessionsOpenFunc) {
	t.Helper()
	clk := clock.NewFake(Start)
	st := open(t, clk)
	ctx := t.Context()
	a := store.Session{ID: HashedKeys(0, 1)[0], User: "ana", Provider: "password", Access: "operator:acme", ExpiresAt: Start.Add(time.Hour)}
	noErr(t, st.CreateSession(ctx, a))
	noErr(t, st.CreateSession(ctx, store.Session{ID: HashedKeys(1, 1)[0], User: "ana", Provider: "password", Access: "operator:acme", ExpiresAt: Start.Add(2 * time.Hour)}))
	noErr(t, st.CreateSession(ctx, store.Session{ID: HashedKeys(2, 1)[0], User: "oidc:bo", Provider: "oidc", Access: "viewer", ExpiresAt: Start.Add(3 * time.Hour)}))
	if err := st.CreateSession(ctx, a); err == nil {
		t.Error("a second session with the same id was stored")
	}

	got := must(st.GetSession(ctx, a.ID))(t)
	equal(t, "user", got.User, "ana")
	equal(t, "provider", got.Provider, "password")
	equal(t, "access", got.Access, "operator:acme")
	sameTime(t, "created", got.CreatedAt, Start)
	sameTime(t, "expires", got.ExpiresAt, Start.Add(time.Hour))
	sameTime(t, "last seen", got.LastSeenAt, Start)

	clk.Advance(10 * time.Minute)
	noErr(t, st.TouchSession(ctx, a.ID))
	sameTime(t, "last seen after touch", must(st.GetSession(ctx, a.ID))(t).LastSeenAt, Start.Add(10*time.Minute))

	if _, err := st.GetSession(ctx, HashedKeys(9, 1)[0]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown session: %v, want ErrNotFound", err)
	}
	clk.Advance(50 * time.Minute) // a expires now
	if _, err := st.GetSession(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired session: %v, want ErrNotFound", err)
	}
	equal(t, "pruned", must(st.PruneSessions(ctx))(t), int64(1))
	must(st.GetSession(ctx, HashedKeys(1, 1)[0]))(t)

	// Sign out everywhere: only that user's sessions end.
	noErr(t, st.CreateSession(ctx, store.Session{ID: HashedKeys(3, 1)[0], User: "ana", Provider: "password", Access: "operator:acme", ExpiresAt: Start.Add(4 * time.Hour)}))
	equal(t, "signed out", must(st.DeleteUserSessions(ctx, "ana"))(t), int64(2))
	for _, id := range []string{HashedKeys(1, 1)[0], HashedKeys(3, 1)[0]} {
		if _, err := st.GetSession(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("session of a user signed out everywhere: %v", err)
		}
	}
	bo := must(st.GetSession(ctx, HashedKeys(2, 1)[0]))(t)
	equal(t, "other user kept", bo.User, "oidc:bo")
	noErr(t, st.DeleteSession(ctx, bo.ID))
	noErr(t, st.DeleteSession(ctx, bo.ID)) // twice: no error
	if _, err := st.GetSession(ctx, bo.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted session: %v", err)
	}
}
