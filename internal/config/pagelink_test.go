package config_test

import (
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

// TestPageLink: alerts link to serve's pages at web.url, else at web.listen
// (an unspecified host named by the machine's name, https when serve is
// reached over TLS).
func TestPageLink(t *testing.T) {
	t.Parallel()
	cases := []struct {
		web             config.Web
		workspace, sync string
		want            string
	}{
		{config.Web{URL: "https://oncesync.example.com/"}, "acme", "crm sync", "https://oncesync.example.com/syncs/crm%20sync"},
		{config.Web{URL: "https://example.com/oncesync"}, "acme", "", "https://example.com/oncesync/#workspace-acme"},
		{config.Web{}, "", "crm", "http://127.0.0.1:8080/syncs/crm"},
		{config.Web{Listen: "0.0.0.0:9000"}, "", "crm", "http://worker-7:9000/syncs/crm"},
		{config.Web{Listen: ":9000", Secure: true}, "", "crm", "https://worker-7:9000/syncs/crm"},
		{config.Web{Listen: "[::]:9000", TLSCert: "c.pem", TLSKey: "k.pem"}, "", "", "https://worker-7:9000/"},
		{config.Web{Listen: "[::1]:9000"}, "", "crm", "http://[::1]:9000/syncs/crm"},
	}
	for _, c := range cases {
		if got := config.PageLink(c.web.PageBase("worker-7"))(c.workspace, c.sync); got != c.want {
			t.Errorf("%+v: link(%q, %q) = %q, want %q", c.web, c.workspace, c.sync, got, c.want)
		}
	}
	if got := config.PageLink(config.Web{Listen: "0.0.0.0:9000"}.PageBase(""))("", "crm"); got != "http://localhost:9000/syncs/crm" {
		t.Errorf("no hostname: %q", got)
	}
}

func TestWebURLIsChecked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ url, want string }{
		{"https://oncesync.example.com", ""},
		{"oncesync.example.com", "web.url: must be a URL starting with http:// or https://"},
		{"https://oncesync.example.com/?next=1", "web.url: must be the address of serve's pages alone"},
		{"https://admin:pw@oncesync.example.com", "web.url: must be the address of serve's pages alone"},
	} {
		_, err := config.Parse("c.yaml", []byte(`web: {url: "`+c.url+`"}
syncs:
  - id: s1
    source: {type: csv, path: a.csv}
    destination: {type: webhook, url: "https://example.com/hook"}
`), envMap(nil), kinds)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.url, err, c.want)
		case err != nil && strings.Contains(err.Error(), "pw"):
			t.Errorf("%s: the error echoes the password: %v", c.url, err)
		}
	}
}
