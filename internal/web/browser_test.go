package web

import (
	"context"
	"encoding/csv"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

// screenshotDir receives the README's screenshots when ONCESYNC_SCREENSHOTS=1.
var screenshotDir = filepath.Join("..", "..", "docs", "img")

func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts headless Chromium; it skips without one, except in CI.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("Chromium is missing (apt-get install -y chromium); browser tests must run in CI")
		}
		t.Skip("Chromium is missing (apt-get install -y chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// shot writes a full-page PNG to docs/img when ONCESYNC_SCREENSHOTS=1.
func shot(t *testing.T, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if os.Getenv("ONCESYNC_SCREENSHOTS") != "1" {
			return nil
		}
		buf, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
			return err
		}
		t.Logf("screenshot %s (%d bytes)", name, len(buf))
		return os.WriteFile(filepath.Join(screenshotDir, name), buf, 0o644)
	})
}

type css = chromedp.CSS

// TestBrowserResumeTrippedSync: sign in, open a sync tripped by the breaker,
// see the pause reason and the last error with its next step and owner,
// resume it giving a name and a reason, and find the audit entry.
// browsing is a headless browser on the test server of b: step runs
// actions, text reads an element's text with its spaces folded.
type browsing struct {
	t   *testing.T
	ctx context.Context
	url string
}

func browse(t *testing.T, b *bundle) *browsing {
	t.Helper()
	ctx := browser(t)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	return &browsing{t: t, ctx: ctx, url: ts.URL}
}

func (br *browsing) step(what string, steps ...chromedp.Action[chromedp.Void]) {
	br.t.Helper()
	if err := chromedp.Do(br.ctx, steps...); err != nil {
		br.t.Fatalf("%s: %v", what, err)
	}
}

func (br *browsing) text(sel string) string {
	br.t.Helper()
	s, err := chromedp.Run(br.ctx, chromedp.Text(css(sel)))
	if err != nil {
		br.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.Join(strings.Fields(s), " ")
}

func TestBrowserResumeTrippedSync(t *testing.T) {
	b := setup(t)
	br := browse(t, b)
	ctx, step, text := br.ctx, br.step, br.text

	step("open", chromedp.Navigate(br.url+"/"), chromedp.WaitVisible(css(`input[name=user]`)))
	loginURL, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.Contains(loginURL, "/login?next=") {
		t.Errorf("not sent to sign in first: %s %v", loginURL, err)
	}
	step("sign in",
		chromedp.SendKeys(css(`input[name=user]`), testUser),
		chromedp.SendKeys(css(`input[name=password]`), testPassword),
		chromedp.Click(css(`section.login button[type=submit]`)),
		chromedp.WaitVisible(css(`table.syncs`)),
		shot(t, "overview.png"))
	overview := text("main")
	for _, want := range []string{b.d.Breaker, "paused by breaker", "silent", "marketing", "data"} {
		if !strings.Contains(overview, want) {
			t.Errorf("overview lacks %q", want)
		}
	}

	step("healthy sync", chromedp.Navigate(br.url+"/syncs/"+b.d.Healthy), chromedp.WaitVisible(css(`section.facts`)),
		shot(t, "sync-healthy.png"))
	step("silent sync", chromedp.Navigate(br.url+"/syncs/"+b.d.Silent), chromedp.WaitVisible(css(`#silence`)),
		shot(t, "sync-silent.png"))
	if silent := text("#silence"); !strings.Contains(silent, "runs_without_success") {
		t.Errorf("silence: %q", silent)
	}

	step("paused sync", chromedp.Navigate(br.url+"/"),
		chromedp.Click(css(`a[href="/syncs/`+b.d.Breaker+`"]`)),
		chromedp.WaitVisible(css(`#paused`)),
		shot(t, "sync-paused.png"),
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		shot(t, "sync-paused-phone.png"),
		chromedp.EmulateViewport(1280, 900))
	if paused := text("#paused"); !strings.Contains(paused, "Paused by the circuit breaker") || !strings.Contains(paused, "failure streak reached 5") {
		t.Errorf("pause reason: %q", paused)
	}
	lastErr := text("#last-error")
	e := failure.Lookup(failure.DestinationAuth)
	for _, want := range []string{"destination_auth", e.WhatHappened, "Next step: " + strings.ReplaceAll(e.NextStep, "`", ""), "Owner: you", "How to recover from destination_auth"} {
		if !strings.Contains(lastErr, want) {
			t.Errorf("last error lacks %q:\n%s", want, lastErr)
		}
	}

	step("resume",
		chromedp.SendKeys(css(`form[action$="/resume"] input[name=why]`), "rotated the Brevo API key"),
		chromedp.Click(css(`form[action$="/resume"] button[type=submit]`)),
		chromedp.WaitVisible(css(`p.flash`)))
	if flash := text("p.flash"); !strings.Contains(flash, "Sync resumed") {
		t.Errorf("flash %q", flash)
	}
	step("audit", chromedp.Navigate(br.url+"/audit"), chromedp.WaitVisible(css(`table.audit`)))
	audit := text("table.audit")
	if !strings.Contains(audit, "resume") || !strings.Contains(audit, testUser) || !strings.Contains(audit, "rotated the Brevo API key") {
		t.Errorf("audit lacks the resume entry:\n%s", audit)
	}
	sy, err := b.st.GetSync(b.ctx, b.d.Breaker)
	if err != nil || sy.State != store.SyncActive || sy.PausedBy != "" {
		t.Errorf("sync after resume: %+v %v", sy, err)
	}
}

// TestBrowserRecordsByIdentity: a person opens a run with rejected and
// in-doubt records, finds them listed by identity with their reasons,
// follows the run's records link, downloads the CSV the page links to and
// reads it back; the sync page's chart has one bar per run.
func TestBrowserRecordsByIdentity(t *testing.T) {
	b := setup(t)
	br := browse(t, b)
	ctx, step, text := br.ctx, br.step, br.text
	step("sign in", chromedp.Navigate(br.url+"/login"), chromedp.WaitVisible(css(`input[name=user]`)),
		chromedp.SendKeys(css(`input[name=user]`), testUser),
		chromedp.SendKeys(css(`input[name=password]`), testPassword),
		chromedp.Click(css(`section.login button[type=submit]`)),
		chromedp.WaitVisible(css(`table.syncs`)))

	step("run page", chromedp.Navigate(br.url+"/runs/"+strconv.FormatInt(b.d.RecordsRun.ID, 10)), chromedp.WaitVisible(css(`#rejected`)))
	if got := text("#rejected"); !strings.Contains(got, "id-0") || !strings.Contains(got, "Invalid phone number (attribute SMS)") {
		t.Fatalf("rejected section: %s", got)
	}
	if got := text("#in-doubt"); !strings.Contains(got, "id-2") || !strings.Contains(got, "id-3") {
		t.Fatalf("in-doubt section: %s", got)
	}

	step("the run's records", chromedp.Click(css(`#rejected a[href*="/records?run="]`)), chromedp.WaitVisible(css(`table#records`)))
	table := text("table#records")
	for _, want := range []string{"id-0", "id-1", "id-2", "id-3", "rejected", "in doubt", "Invalid phone number", "outcome is unknown"} {
		if !strings.Contains(table, want) {
			t.Errorf("records table lacks %q: %s", want, table)
		}
	}
	csvText, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`fetch(document.querySelector('a[download]').href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	rows, err := csv.NewReader(strings.NewReader(csvText)).ReadAll()
	if err != nil || len(rows) != 5 || strings.Join(rows[0], ",") != strings.Join(ledger.RecordCSVHeader, ",") {
		t.Fatalf("csv %q: %v", rows, err)
	}
	ids := map[string]string{}
	for _, r := range rows[1:] {
		ids[r[0]] = r[1]
	}
	if ids["id-0"] != "rejected" || ids["id-1"] != "rejected" || ids["id-2"] != "in doubt" || ids["id-3"] != "in doubt" {
		t.Fatalf("csv records %v", ids)
	}

	step("search", chromedp.SendKeys(css(`input[name=q]`), "id-3"), chromedp.Submit(css(`form.search`)))
	// The old page's table is visible until the new page loads: wait for
	// the search's own URL first.
	testenv.WaitFor(t, 30*time.Second, "the search's page", func() bool {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		return err == nil && strings.Contains(loc, "q=id-3")
	})
	step("search results", chromedp.WaitVisible(css(`table#records`)))
	if got := text("table#records tbody"); !strings.Contains(got, "id-3") || strings.Contains(got, "id-0") {
		t.Fatalf("search for id-3: %s", got)
	}

	step("sync page", chromedp.Navigate(br.url+"/syncs/"+b.d.Healthy), chromedp.WaitVisible(css(`figure.runchart`)),
		shot(t, "sync-healthy.png"))
	bars, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`figure.runchart g.bar`)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.srv.syncDetail(b.ctx, b.d.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	if len(bars) != min(len(d.Runs), chartRuns) {
		t.Fatalf("%d bars for %d runs", len(bars), len(d.Runs))
	}
}
