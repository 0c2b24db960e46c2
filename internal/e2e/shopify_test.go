package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/fakeshopify"
	"github.com/oncesync/oncesync/internal/testenv"
)

const shopToken = "shpat_e2e_secret_0123456789abcdef"

// TestShopifyToBrevoKillNine: a shopify → Brevo sync against the fake
// Shopify (its cost throttle on) and the fake Brevo; the run is killed
// -9 mid-run and resumed: every customer reaches Brevo once, with its
// values. Then customers change: the next run sends exactly those, and
// the one after sends nothing.
func TestShopifyToBrevoKillNine(t *testing.T) {
	t.Parallel()
	const customers = 2000
	// A Plus-sized bucket, so that the run both waits for it and ends in
	// seconds: 20 pages of 100 cost 302 points each. And an unkind shop:
	// 5xx, 429 with Retry-After and cut connections now and then.
	shop := fakeshopify.New(fakeshopify.Options{Token: shopToken, BucketSize: 2000, RestoreRate: 1000,
		ErrorRate: 0.05, RateLimitRate: 0.03, RetryAfter: 200 * time.Millisecond, DropRate: 0.03})
	seeded := shop.Seed(customers)
	shopSrv := newServer(t, shop)

	var (
		mu     sync.Mutex
		victim *os.Process
		writes int
		armed  = true
	)
	fake := fakebrevo.New(fakebrevo.Options{APIKey: apiKey, Validate: true, Attributes: fakebrevo.WithAttributes("SHOPIFY_ID"),
		AfterWrite: func(*http.Request) {
			mu.Lock()
			defer mu.Unlock()
			writes++
			if armed && writes == 6 && victim != nil {
				armed = false
				_ = victim.Signal(syscall.SIGKILL)
			}
		}})
	tb := &testBundle{t: t, dir: t.TempDir(), fake: fake}
	tb.srv = newServer(t, fake)
	tb.config = filepath.Join(tb.dir, "oncesync.yaml")
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
syncs:
  - id: shop
    workspace: acme
    source: {type: shopify, shop_url: "%s", access_token: "${SHOPIFY_TOKEN}", api_version: 2025-07, page_size: 100}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: firstName, LASTNAME: lastName, SHOPIFY_ID: id}}
`, shopSrv.URL, tb.srv.URL)
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() *proc {
		p := testenv.Start(t, testenv.StartParams{
			Binary: binary, Args: []string{"run", "--config", tb.config, "shop", "--log-level", "debug"}, Dir: tb.dir,
			Env:  []string{"BREVO_API_KEY=" + apiKey, "SHOPIFY_TOKEN=" + shopToken},
			Name: "oncesync run shop",
			OnExit: func(p *testenv.Proc) {
				tb.mu.Lock()
				tb.output.Write(p.Out.Bytes())
				tb.mu.Unlock()
			},
		})
		mu.Lock()
		victim = p.Cmd.Process
		mu.Unlock()
		return p
	}
	if code := run().Wait(t, 2*time.Minute); code != -int(syscall.SIGKILL) {
		t.Fatalf("run 1 should have been killed, exit %d", code)
	}
	if st := fake.Stats(); st.Contacts >= customers || st.Contacts == 0 {
		t.Fatalf("after the kill %d contacts; want some, not all", st.Contacts)
	}
	p := run()
	if code := p.Wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("resumed run exit %d:\n%s", code, p.Out)
	}
	check := func(what string, wantWritten int64) {
		t.Helper()
		st := fake.Stats()
		if st.Contacts != int64(len(seeded)) || st.ContactsWritten != wantWritten || st.DuplicateWrites != 0 || st.Invalid != 0 {
			t.Fatalf("%s: want %d contacts, %d writes, no duplicates; got contacts %d, written %d, duplicates %d, invalid %d",
				what, len(seeded), wantWritten, st.Contacts, st.ContactsWritten, st.DuplicateWrites, st.Invalid)
		}
		for _, c := range seeded {
			now, _ := shop.Customer(c.ID)
			got, ok := fake.Contact(now.Email)
			if !ok {
				t.Fatalf("%s: customer %d is not at Brevo", what, c.ID)
			}
			if fmt.Sprint(got.Attributes["FIRSTNAME"]) != now.FirstName || fmt.Sprint(got.Attributes["LASTNAME"]) != now.LastName ||
				fmt.Sprint(got.Attributes["SHOPIFY_ID"]) != fmt.Sprint(c.ID) {
				t.Fatalf("%s: customer %d at Brevo has %v; want %s %s", what, c.ID, got.Attributes, now.FirstName, now.LastName)
			}
		}
	}
	check("after the resumed run", customers)
	if st := shop.Stats(); st.Throttled == 0 && st.CostCharged < 2000 {
		t.Logf("the bucket was never short (cost %d)", st.CostCharged)
	}

	// Changes: three customers, one of them twice, and a new one.
	time.Sleep(1100 * time.Millisecond) // Shopify's updatedAt has seconds: let the changes be later than the pass's end
	for _, i := range []int{0, 999, 1999} {
		shop.Update(seeded[i].ID, func(c *fakeshopify.Customer) { c.FirstName = "Changed" })
	}
	shop.Update(seeded[999].ID, func(c *fakeshopify.Customer) { c.LastName = "Twice" })
	seeded = append(seeded, shop.Put(fakeshopify.Customer{Email: "new-customer@example.com", FirstName: "New", LastName: "One"})...)
	if p := run(); p.Wait(t, time.Minute) != 0 {
		t.Fatalf("incremental run failed:\n%s", p.Out)
	}
	check("after the incremental run", customers+4)
	if p := run(); p.Wait(t, time.Minute) != 0 {
		t.Fatalf("last run failed:\n%s", p.Out)
	}
	check("after a run without changes", customers+4)
	tb.checkNoSecrets(t)
	tb.mu.Lock()
	out := tb.output.String()
	tb.mu.Unlock()
	if strings.Contains(out, shopToken) {
		t.Fatal("the Shopify token appears in the output")
	}
	stores, _ := filepath.Glob(filepath.Join(tb.dir, "oncesync.db*"))
	for _, f := range stores {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), shopToken) {
			t.Fatalf("the Shopify token is stored in %s", filepath.Base(f))
		}
	}
	st := shop.Stats()
	if st.Dropped+st.ByStatus["429"]+st.ByStatus["500"]+st.ByStatus["502"]+st.ByStatus["503"]+st.ByStatus["504"] == 0 {
		t.Log("no fault was injected this time (they are random)")
	}
	t.Logf("fake Shopify: requests %d, by status %v, dropped %d, cost %d", st.Requests, st.ByStatus, st.Dropped, st.CostCharged)

	// A wrong token: the run fails with source_auth, without the token.
	const wrong = "shpat_wrong_0123456789"
	p = testenv.Start(t, testenv.StartParams{
		Binary: binary, Args: []string{"run", "--config", tb.config, "shop"}, Dir: tb.dir,
		Env: []string{"BREVO_API_KEY=" + apiKey, "SHOPIFY_TOKEN=" + wrong}, Name: "oncesync run shop (wrong token)",
	})
	if code := p.Wait(t, time.Minute); code == 0 {
		t.Fatal("a run with a wrong token succeeded")
	}
	if last := p.LastLine(); !strings.HasPrefix(last, "failed: source_auth: ") || strings.Contains(p.Out.String(), wrong) {
		t.Fatalf("wrong token: last line %q (the token must not appear):\n%s", last, p.Out)
	}
	t.Logf("wrong token: %s", p.LastLine())
}

// TestFakeShopifyCommand: `oncesync fake-shopify` seeds customers, serves
// the GraphQL endpoint with its token, takes changes on /_customers and
// counts on /_stats.
func TestFakeShopifyCommand(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "fake-shopify", "--listen", "127.0.0.1:0", "--token", "tok", "--customers", "7")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var base string
	for _, f := range strings.Fields(line) {
		if strings.HasPrefix(f, "http://") && !strings.Contains(f, "_stats") {
			base = f
		}
	}
	if base == "" {
		t.Fatalf("no address in %q", line)
	}
	resp, err := http.Post(base+"/_customers", "application/json", strings.NewReader(`{"seed": 3}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /_customers: %v %v", resp, err)
	}
	resp.Body.Close()
	query := func(tok string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/admin/api/2025-07/graphql.json",
			strings.NewReader(`{"query":"{ customers(first: 250) { nodes { id } pageInfo { hasNextPage } } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Shopify-Access-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := query("wrong"); code != 401 || !strings.Contains(body, "Invalid API key or access token") {
		t.Fatalf("wrong token: %d %s", code, body)
	}
	code, body := query("tok")
	if code != 200 || strings.Count(body, "gid://shopify/Customer/") != 10 || !strings.Contains(body, `"throttleStatus"`) {
		t.Fatalf("customers: %d %s", code, body)
	}
	resp, err = http.Get(base + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	var st fakeshopify.Stats
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Customers != 10 || st.Requests != 2 || st.Unauthorized != 1 {
		t.Fatalf("stats %+v", st)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("fake-shopify did not stop cleanly on SIGTERM: %v", err)
	}
}
