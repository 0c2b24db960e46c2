package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// TestSignOutCommand: `oncesync signout USER` ends that person's sessions
// in the store, and no one else's.
func TestSignOutCommand(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)
	st := b.openStore(t)
	exp := time.Now().Add(time.Hour) // the command reads the real clock
	for _, s := range []store.Session{
		{ID: strings.Repeat("a", 64), User: "alice", Provider: "password", Access: "admin", ExpiresAt: exp},
		{ID: strings.Repeat("b", 64), User: "alice", Provider: "password", Access: "admin", ExpiresAt: exp},
		{ID: strings.Repeat("c", 64), User: "bob", Provider: "password", Access: "viewer", ExpiresAt: exp},
	} {
		if err := st.CreateSession(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.Close()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"signout", "--config", b.config, "alice"},
		Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk})
	if code != ExitOK || !strings.Contains(out.String(), "alice: 2 session(s) ended") {
		t.Fatalf("signout: exit %d: %s%s", code, out.String(), errOut.String())
	}
	// A name that is no user and has no session: nothing ended, exit 1.
	out.Reset()
	errOut.Reset()
	code = Main(t.Context(), []string{"signout", "--config", b.config, "nobody"},
		Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk})
	if code != ExitFailed || !strings.Contains(errOut.String(), `no session of "nobody"`) {
		t.Fatalf("signout nobody: exit %d: %s%s", code, out.String(), errOut.String())
	}
	st = b.openStore(t)
	defer st.Close()
	if _, err := st.GetSession(t.Context(), strings.Repeat("a", 64)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("alice's session: %v", err)
	}
	if _, err := st.GetSession(t.Context(), strings.Repeat("c", 64)); err != nil {
		t.Errorf("bob's session ended too: %v", err)
	}
}
