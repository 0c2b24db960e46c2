package web

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"
)

// TestBrowserRoles signs in, in one browser, as a viewer of marketing, an
// operator of data and an admin of every workspace, and shows that each
// sees and can do exactly what its role allows: the viewer sees
// marketing's syncs without any action and not data's; the operator of
// data pauses a data sync (audited under its name) and cannot reach
// marketing's; the admin sees both and the queue.
func TestBrowserRoles(t *testing.T) {
	b := setup(t, withTeams(t))
	br := browse(t, b)
	step, text := br.step, br.text
	signIn := func(user string) {
		t.Helper()
		step("sign in as "+user, chromedp.Navigate(br.url+"/login"), chromedp.WaitVisible(css(`input[name=user]`)),
			chromedp.SendKeys(css(`input[name=user]`), user),
			chromedp.SendKeys(css(`input[name=password]`), testPassword),
			chromedp.Click(css(`section.login button[type=submit]`)),
			chromedp.WaitVisible(css(`form.signout`)))
	}
	signOut := func() {
		t.Helper()
		step("sign out", chromedp.Click(css(`form.signout button[type=submit]:not([formaction])`)), chromedp.WaitVisible(css(`input[name=user]`)))
	}
	has := func(sel string) bool {
		t.Helper()
		n, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n > 0
	}

	// Viewer of marketing.
	signIn(viewerMkt)
	overview := text("main")
	if !strings.Contains(overview, b.d.Healthy) || strings.Contains(overview, b.d.Failing) || strings.Contains(overview, "data") {
		t.Errorf("viewer's overview: %s", overview)
	}
	if has(`a[href="/riverui/"]`) {
		t.Error("a viewer is offered River's UI")
	}
	step("viewer: a marketing sync", chromedp.Navigate(br.url+"/syncs/"+b.d.Healthy), chromedp.WaitVisible(css(`section.facts`)))
	if !has(`#read-only`) || has(`form[action$="/pause"]`) || has(`form[action$="/run"]`) || has(`form[action$="/check"]`) {
		t.Error("the viewer's sync page offers actions")
	}
	step("viewer: a data sync", chromedp.Navigate(br.url+"/syncs/"+b.d.Failing), chromedp.WaitVisible(css(`main`)))
	if got := text("main"); !strings.Contains(got, "404") && !strings.Contains(got, "no such sync") {
		t.Errorf("data's sync for a viewer of marketing: %s", got)
	}
	// Even a hand-made form is refused.
	res, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`fetch('/syncs/`+b.d.Healthy+`/pause', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
		body: 'why=x&csrf=' + encodeURIComponent(document.querySelector('form.signout input[name=csrf]').value)}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || res != 403 {
		t.Errorf("a viewer's pause: %d %v", res, err)
	}
	signOut()

	// Operator of data.
	signIn(operatorData)
	if o := text("main"); !strings.Contains(o, b.d.Failing) || strings.Contains(o, b.d.Healthy) {
		t.Errorf("operator of data's overview: %s", o)
	}
	step("operator: pause a data sync", chromedp.Navigate(br.url+"/syncs/"+b.d.Failing), chromedp.WaitVisible(css(`form[action$="/pause"]`)),
		chromedp.SendKeys(css(`form[action$="/pause"] input[name=why]`), "investigating the scores"),
		chromedp.Click(css(`form[action$="/pause"] button[type=submit]`)),
		chromedp.WaitVisible(css(`p.flash`)))
	if flash := text("p.flash"); !strings.Contains(flash, "Sync paused") {
		t.Errorf("flash %q", flash)
	}
	if a, _ := b.st.ListAudit(b.ctx, b.d.Failing, 1); len(a) != 1 || a[0].Action != "pause" || a[0].By != operatorData {
		t.Errorf("audit %+v, want a pause by %s", a, operatorData)
	}
	step("operator: a marketing sync", chromedp.Navigate(br.url+"/syncs/"+b.d.Healthy), chromedp.WaitVisible(css(`main`)))
	if got := text("main"); !strings.Contains(got, "no such sync") {
		t.Errorf("marketing's sync for an operator of data: %s", got)
	}
	if has(`a[href="/riverui/"]`) {
		t.Error("an operator is offered River's UI")
	}
	signOut()

	// Admin of every workspace.
	signIn(adminAll)
	if o := text("main"); !strings.Contains(o, b.d.Failing) || !strings.Contains(o, b.d.Healthy) {
		t.Errorf("admin's overview: %s", o)
	}
	if !has(`a[href="/riverui/"]`) {
		t.Error("the admin is not offered River's UI")
	}
	step("admin: River's UI", chromedp.Navigate(br.url+"/riverui/"), chromedp.WaitVisible(css(`body`)))
	if got := text("body"); got != "river ui" {
		t.Errorf("River's UI for the admin: %q", got)
	}
	step("admin: resume the data sync", chromedp.Navigate(br.url+"/syncs/"+b.d.Failing), chromedp.WaitVisible(css(`form[action$="/resume"]`)),
		chromedp.SendKeys(css(`form[action$="/resume"] input[name=why]`), "scores fixed"),
		chromedp.Click(css(`form[action$="/resume"] button[type=submit]`)),
		chromedp.WaitVisible(css(`p.flash`)))
	if a, _ := b.st.ListAudit(b.ctx, b.d.Failing, 1); len(a) != 1 || a[0].Action != "resume" || a[0].By != adminAll {
		t.Errorf("audit %+v, want a resume by %s", a, adminAll)
	}
}

// TestBrowserOIDCSignIn: "Sign in with single sign-on" on the sign-in page
// goes to the local provider and back, signed in as a viewer of data by
// the groups claim.
func TestBrowserOIDCSignIn(t *testing.T) {
	b, m, ts := oidcProvider(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-3", PreferredUsername: "vic", Groups: []string{"oncesync:viewer:data"}})
	br := &browsing{t: t, ctx: browser(t), url: ts.URL}
	br.step("sign in with the provider", chromedp.Navigate(br.url+"/"), chromedp.WaitVisible(css(`a#oidc`)),
		chromedp.Click(css(`a#oidc`)),
		chromedp.WaitVisible(css(`form.signout`)))
	if who := br.text("form.signout"); !strings.Contains(who, "oidc:vic") || !strings.Contains(who, "viewer") {
		t.Errorf("signed in as %q", who)
	}
	if o := br.text("main"); !strings.Contains(o, b.d.Failing) || strings.Contains(o, b.d.Healthy) {
		t.Errorf("overview of a viewer of data: %s", o)
	}
}
