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
	// An empty hash is no user: `validate` names it, as `serve` would
	// otherwise fail to start its web UI.
	for _, users := range []string{"    root: \"\"\n", "    root: {hash: \"\", role: viewer}\n"} {
		_, err := config.Parse("c.yaml", []byte("web:\n  users:\n"+users+base), nil, kinds)
		if err == nil || !strings.Contains(err.Error(), "c.yaml:3: web.users.root") || !strings.Contains(err.Error(), "is required") {
			t.Fatalf("an empty password hash (%q) accepted or badly reported: %v", users, err)
		}
	}
	cfg, err := config.Parse("c.yaml", []byte("web:\n  users:\n    ada: \"$2y$12$abc\"\n"+base), nil, kinds)
	if err != nil || cfg.Web.Users["ada"].Hash != "$2y$12$abc" || cfg.Web.Users["ada"].Role != config.RoleAdmin || cfg.Web.Users["ada"].Workspaces != nil {
		t.Fatalf("hash refused: %v", err)
	}
	for _, s := range cfg.SecretValues() {
		if s == "$2y$12$abc" {
			return
		}
	}
	t.Fatal("password hashes must count as secrets")
}

func TestWebRolesAndTokens(t *testing.T) {
	t.Parallel()
	base := "syncs:\n  - id: a\n    source: {type: csv, path: a.csv}\n    destination: {type: webhook, url: http://127.0.0.1:1/x}\n"
	cfg, err := config.Parse("c.yaml", []byte(`web:
  users:
    root: "$2y$12$abc"
    al: {hash: "$2y$12$def", role: operator, workspaces: [acme]}
    vi: {hash: "$2y$12$ghi", role: viewer, workspaces: ["*"]}
  api_tokens:
    - legacy-secret-1
    - {name: ci, token: ci-secret-2, role: viewer, workspaces: [acme, shop]}
`+base), nil, kinds)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Web
	if u := w.Users["root"]; u.Role != config.RoleAdmin || u.Workspaces != nil {
		t.Errorf("bare hash = %+v, want admin of every workspace", u)
	}
	if u := w.Users["al"]; u.Hash != "$2y$12$def" || u.Role != config.RoleOperator || strings.Join(u.Workspaces, ",") != "acme" {
		t.Errorf("al = %+v", u)
	}
	if u := w.Users["vi"]; u.Role != config.RoleViewer || u.Workspaces != nil {
		t.Errorf(`["*"] must mean every workspace: %+v`, u)
	}
	want := []config.APIToken{
		{Name: "token-1", Token: "legacy-secret-1", Access: config.Access{Role: config.RoleAdmin}},
		{Name: "ci", Token: "ci-secret-2", Access: config.Access{Role: config.RoleViewer, Workspaces: []string{"acme", "shop"}}},
	}
	if len(w.APITokens) != 2 || w.APITokens[0].Name != want[0].Name || w.APITokens[0].Token != want[0].Token || w.APITokens[0].Role != want[0].Role || w.APITokens[0].Workspaces != nil ||
		w.APITokens[1].Name != "ci" || w.APITokens[1].Token != "ci-secret-2" || w.APITokens[1].Role != config.RoleViewer || strings.Join(w.APITokens[1].Workspaces, ",") != "acme,shop" {
		t.Errorf("tokens = %+v, want %+v", w.APITokens, want)
	}
	secrets := strings.Join(cfg.SecretValues(), "\n")
	for _, s := range []string{"legacy-secret-1", "ci-secret-2", "$2y$12$def"} {
		if !strings.Contains(secrets, s) {
			t.Errorf("%s is not a secret", s)
		}
	}

	_, err = config.Parse("c.yaml", []byte(`web:
  users:
    al: {hash: "$2y$12$def", role: superuser}
    bo: {hash: "$2y$12$def"}
    ci: "$2y$12$abc"
  api_tokens:
    - {name: ci, token: tok-a, role: viewer}
    - {name: "", token: tok-b, role: viewer}
    - {name: deploy, token: tok-c, role: root}
    - {name: deploy, token: tok-d, role: admin, workspaces: []}
    - {name: other, token: tok-a, role: admin, workspaces: ["bad name"]}
`+base), nil, kinds)
	for _, w := range []string{
		`c.yaml:3: web.users.al.role: unknown role "superuser": must be viewer, operator or admin`,
		`c.yaml:4: web.users.bo.role: is required: viewer, operator or admin`,
		`c.yaml:7: web.api_tokens[0].name: "ci" is already the name of web.users.ci`,
		`c.yaml:8: web.api_tokens[1].name: is required`,
		`c.yaml:9: web.api_tokens[2].role: unknown role "root"`,
		`c.yaml:10: web.api_tokens[3].name: "deploy" is already the name of web.api_tokens[2].name`,
		`c.yaml:10: web.api_tokens[3].workspaces: is empty`,
		`c.yaml:11: web.api_tokens[4].token: is the same token as web.api_tokens[0].token`,
		`c.yaml:11: web.api_tokens[4].workspaces[0]: must be a workspace name`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in:\n%v", w, err)
		}
	}
	if err != nil && (strings.Contains(err.Error(), "tok-a") || strings.Contains(err.Error(), "tok-b")) {
		t.Errorf("a token was echoed: %v", err)
	}
}

func TestWebOIDC(t *testing.T) {
	t.Parallel()
	base := "syncs:\n  - id: a\n    source: {type: csv, path: a.csv}\n    destination: {type: webhook, url: http://127.0.0.1:1/x}\n"
	cfg, err := config.Parse("c.yaml", []byte("web:\n  oidc: {issuer: https://idp.example.com, client_id: os, client_secret: oidc-s3cret, roles_claim: groups, workspaces_claim: teams}\n"+base), nil, kinds)
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Web.OIDC; o == nil || o.Issuer != "https://idp.example.com" || o.ClientID != "os" || o.RolesClaim != "groups" || o.WorkspacesClaim != "teams" {
		t.Fatalf("oidc = %+v", cfg.Web.OIDC)
	}
	if !strings.Contains(strings.Join(cfg.SecretValues(), "\n"), "oidc-s3cret") {
		t.Error("the client secret is not a secret")
	}
	_, err = config.Parse("c.yaml", []byte("web:\n  oidc:\n    issuer: not a url\n    client_secret: oidc-s3cret\n    scopes: [profile]\n"+base), nil, kinds)
	for _, w := range []string{
		"c.yaml:3: web.oidc.issuer:",
		"c.yaml:2: web.oidc.client_id: is required",
		"c.yaml:2: web.oidc.roles_claim: is required",
		"c.yaml:5: web.oidc.scopes: must include openid",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in:\n%v", w, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "oidc-s3cret") {
		t.Error("the client secret was echoed")
	}
}
