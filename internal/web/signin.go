package web

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/oncesync/oncesync/internal/clock"
)

// Sign-in defences (docs/guide.md#the-sync-pages-and-the-api): a wrong password costs as much for an unknown name as for a known
// one (the decoy hash has the users' own parameters), at most a few
// password checks run at once (each is 0.1-0.5 s of CPU), and a name or an
// address that keeps failing is refused for a while without a check.
const (
	// passwordChecks is how many password checks run at once.
	passwordChecks = 2
	// throttleFailures failures of one name or one address within
	// throttleWindow refuse it for throttleFor, then each further failure
	// doubles that, up to throttleMax.
	throttleFailures = 5
	throttleWindow   = 15 * time.Minute
	throttleFor      = time.Minute
	throttleMax      = 30 * time.Minute
)

// decoyFor returns a hash that takes as long to check as the users' own:
// bcrypt at the highest cost among them, or argon2id with the parameters of
// one of them, over a random password nobody knows.
func decoyFor(users map[string]string) (string, error) {
	cost, argon := 0, ""
	for _, h := range users {
		if strings.HasPrefix(h, "$argon2id$") {
			argon = h
			continue
		}
		if c, err := bcrypt.Cost([]byte(h)); err == nil && c > cost {
			cost = c
		}
	}
	var pw [32]byte
	_, _ = rand.Read(pw[:])
	if argon != "" && cost == 0 {
		a, err := parseArgon2id(argon)
		if err != nil {
			return "", err
		}
		salt, key := make([]byte, len(a.salt)), make([]byte, len(a.key))
		_, _ = rand.Read(salt)
		_, _ = rand.Read(key)
		enc := base64.RawStdEncoding
		return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", a.memory, a.time, a.threads, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
	}
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	h, err := bcrypt.GenerateFromPassword(pw[:], cost)
	return string(h), err
}

// throttle counts recent sign-in failures by name and by address.
type throttle struct {
	clock clock.Clock
	mu    sync.Mutex
	m     map[string]*failures
}

type failures struct {
	n     int
	first time.Time
	until time.Time // refused until then
}

func newThrottle(c clock.Clock) *throttle { return &throttle{clock: c, m: map[string]*failures{}} }

// blocked reports whether any of keys is refused now, and until when.
func (t *throttle) blocked(keys ...string) (time.Time, bool) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var until time.Time
	for _, k := range keys {
		if f := t.m[k]; f != nil && now.Before(f.until) && f.until.After(until) {
			until = f.until
		}
	}
	return until, !until.IsZero()
}

// failed records a failure of each of keys.
func (t *throttle) failed(keys ...string) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, f := range t.m { // forget what is old, so the map stays small
		if now.Sub(f.first) > throttleWindow && !now.Before(f.until) {
			delete(t.m, k)
		}
	}
	for _, k := range keys {
		f := t.m[k]
		if f == nil {
			f = &failures{first: now}
			t.m[k] = f
		}
		f.n++
		if f.n >= throttleFailures {
			d := throttleFor << min(f.n-throttleFailures, 5)
			f.until = now.Add(min(d, throttleMax))
		}
	}
}

// succeeded forgets keys' failures.
func (t *throttle) succeeded(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		delete(t.m, k)
	}
}

// signInKeys are the throttle's keys of a sign-in: its name and the
// client's address (without the port).
func signInKeys(user string, r *http.Request) []string {
	addr := r.RemoteAddr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	return []string{"user:" + strings.ToLower(user), "addr:" + addr}
}
