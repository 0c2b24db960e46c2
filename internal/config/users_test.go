package config_test

import (
	"github.com/oncesync/oncesync/internal/config"
	"strings"
	"testing"
)

func TestWebUsersMustBeHashes(t *testing.T) {
	t.Parallel()
	base := "syncs:\n  - id: a\n    source: {type: csv, path: a.csv}\n    destination: {type: webhook, url: http://127.0.0.1:1/x}\n"
	_, err := config.Parse("c.yaml", []byte("web:\n  users:\n    ada: hunter2\n"+base), nil, kinds)
	if err == nil || !strings.Contains(err.Error(), "c.yaml:3: web.users.ada: must be a bcrypt or argon2id password hash") {
		t.Fatalf("clear-text password accepted or badly reported: %v", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatal("the password was echoed")
	}
	cfg, err := config.Parse("c.yaml", []byte("web:\n  users:\n    ada: \"$2y$12$abc\"\n"+base), nil, kinds)
	if err != nil || cfg.Web.Users["ada"] != "$2y$12$abc" {
		t.Fatalf("hash refused: %v", err)
	}
	for _, s := range cfg.SecretValues() {
		if s == "$2y$12$abc" {
			return
		}
	}
	t.Fatal("password hashes must count as secrets")
}
