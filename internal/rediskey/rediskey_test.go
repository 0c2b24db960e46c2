package rediskey_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/rediskey"
)

// hashTag applies the Redis Cluster / go-redis Ring rule: the part between the
// first "{" and the first "}" after it, if non-empty; else the whole key.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

func TestKeys(t *testing.T) {
	t.Parallel()
	ks := rediskey.Default()
	tests := []struct {
		name    string
		id      string
		wantTag string // "" = hashed (checked separately)
	}{
		{"plain", "contacts-to-brevo", "sync:contacts-to-brevo"},
		{"dots and underscores", "a.b_c-1", "sync:a.b_c-1"},
		{"closing brace", "a}b", ""},
		{"opening brace", "a{b}", ""},
		{"colon", "acme:contacts", ""},
		{"space", "a b", ""},
		{"non-ASCII", "kontakt-ü", ""},
		{"empty", "", ""},
		{"too long", strings.Repeat("x", 129), ""},
		{"longest plain", strings.Repeat("x", 128), "sync:" + strings.Repeat("x", 128)},
		{"looks hashed", "~abc", ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lease, fence := ks.Lease(tt.id), ks.Fence(tt.id)
			barrier, dead := ks.Barrier(tt.id, 42), ks.DeadLetter(tt.id)
			tag := hashTag(lease)
			for _, k := range []string{fence, ks.LeaseLoss(tt.id), ks.LeaseEnd(tt.id), barrier, dead} {
				if got := hashTag(k); got != tag {
					t.Errorf("key %q has hash tag %q, lease key %q has %q: not one slot", k, got, lease, tag)
				}
			}
			if "{"+tag+"}" != ks.SyncTag(tt.id) {
				t.Errorf("SyncTag(%q) = %q, keys use {%s}", tt.id, ks.SyncTag(tt.id), tag)
			}
			if !strings.HasPrefix(lease, "oncesync:v1:{sync:") || !strings.HasSuffix(lease, "}:lease") {
				t.Errorf("lease key %q does not follow oncesync:v1:{sync:<id>}:lease", lease)
			}
			if strings.Count(lease, "{") != 1 || strings.Count(lease, "}") != 1 {
				t.Errorf("lease key %q has more than one brace pair", lease)
			}
			if tt.wantTag != "" {
				if tag != tt.wantTag {
					t.Errorf("tag = %q, want %q", tag, tt.wantTag)
				}
			} else if want := len("sync:~") + 64; len(tag) != want || !strings.HasPrefix(tag, "sync:~") {
				t.Errorf("tag = %q, want sync:~<sha256 hex>", tag)
			}
			if strings.Contains(lease, "\n") || strings.Contains(lease, " ") {
				t.Errorf("key %q has whitespace", lease)
			}
			if f, ok := seen[lease]; ok {
				t.Errorf("ids %q and %q share the key %q", f, tt.id, lease)
			}
			seen[lease] = tt.id
		})
	}
}

func TestKeysDistinct(t *testing.T) {
	t.Parallel()
	ks := rediskey.Default()
	keys := map[string]bool{}
	for _, k := range []string{ks.Lease("s"), ks.Fence("s"), ks.LeaseLoss("s"), ks.LeaseEnd("s"), ks.Barrier("s", 1), ks.Barrier("s", 2), ks.DeadLetter("s"), ks.Lease("t")} {
		if keys[k] {
			t.Errorf("key %q built twice", k)
		}
		keys[k] = true
	}
	if ks.Lease("a}b") == ks.Lease("a") || hashTag(ks.Lease("a}b")) == hashTag(ks.Lease("a")) {
		t.Error(`id "a}b" shares the hash tag of id "a"`)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		namespace string
		wantErr   bool
	}{
		{"oncesync", false},
		{"test-1a2b_c.d", false},
		{"", true},
		{"a{b", true},
		{"a}b", true},
		{"a:b", true},
		{"a b", true},
		{strings.Repeat("n", 65), true},
	}
	for _, tt := range tests {
		t.Run(tt.namespace, func(t *testing.T) {
			t.Parallel()
			ks, err := rediskey.New(tt.namespace)
			if tt.wantErr {
				if !errors.Is(err, rediskey.ErrInvalidNamespace) {
					t.Fatalf("New(%q) error = %v, want ErrInvalidNamespace", tt.namespace, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tt.namespace, err)
			}
			if want := tt.namespace + ":v1:"; ks.Prefix() != want {
				t.Errorf("Prefix() = %q, want %q", ks.Prefix(), want)
			}
			if k := ks.Lease("s"); k != tt.namespace+":v1:{sync:s}:lease" {
				t.Errorf("Lease = %q", k)
			}
		})
	}
	if got := (rediskey.Space{}).Prefix(); got != "oncesync:v1:" {
		t.Errorf("zero Space prefix = %q", got)
	}
}
