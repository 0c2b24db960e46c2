package fakebrevo

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

const testKey = "test-api-key"

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// bundle is a fake behind a validating proxy, on a real HTTP server.
type bundle struct {
	t     *testing.T
	clock *clock.Fake
	srv   *Server
	proxy *Proxy
	api   string // through the validating proxy
	raw   string // straight to the fake (for requests that break the spec)
}

// setup starts a fake with opts (its clock replaced by a fake clock) behind a
// validating proxy. Unless expectInvalid, the test fails at cleanup when any
// request or response that went through the proxy broke the spec.
func setup(t *testing.T, opts Options, expectInvalid ...bool) *bundle {
	t.Helper()
	clk := clock.NewFake(epoch)
	if opts.Clock == nil {
		opts.Clock = clk
	}
	if opts.Attributes == nil {
		opts.Attributes = WithAttributes("AGE", "VIP", "A", "B", "N") // the tests' account
	}
	srv := New(opts)
	proxy, err := ValidatingProxy(srv)
	if err != nil {
		t.Fatalf("ValidatingProxy: %v", err)
	}
	apiSrv := httptest.NewServer(proxy)
	rawSrv := httptest.NewServer(srv)
	t.Cleanup(func() {
		apiSrv.Close()
		rawSrv.Close()
		if len(expectInvalid) == 0 || !expectInvalid[0] {
			if err := proxy.Err(); err != nil {
				t.Errorf("spec violations through the proxy:\n%v", err)
			}
		}
	})
	return &bundle{t: t, clock: clk, srv: srv, proxy: proxy, api: apiSrv.URL, raw: rawSrv.URL}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

func (r resp) errCode(t *testing.T) errorBody {
	t.Helper()
	var e errorBody
	r.json(t, &e)
	return e
}

// do sends a request with the test api-key through the proxy.
func (b *bundle) do(method, path string, body any) resp {
	b.t.Helper()
	return b.send(b.api, method, path, body, map[string]string{"api-key": testKey})
}

// doRaw sends a request with the test api-key straight to the fake.
func (b *bundle) doRaw(method, path string, body any) resp {
	b.t.Helper()
	return b.send(b.raw, method, path, body, map[string]string{"api-key": testKey})
}

func (b *bundle) send(base, method, path string, body any, headers map[string]string) resp {
	b.t.Helper()
	res, err := b.sendErr(base, method, path, body, headers)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	return res
}

func (b *bundle) sendErr(base, method, path string, body any, headers map[string]string) (resp, error) {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		buf, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, err
	}
	return resp{status: res.StatusCode, header: res.Header, body: data}, nil
}

func (b *bundle) mustStatus(r resp, want int) {
	b.t.Helper()
	if r.status != want {
		b.t.Fatalf("status = %d, want %d; body %s", r.status, want, r.body)
	}
}

func (b *bundle) contact(email string) Contact {
	b.t.Helper()
	c, ok := b.srv.Contact(email)
	if !ok {
		b.t.Fatalf("contact %s not stored", email)
	}
	return c
}

// holdsExactly checks that contact email is stored with exactly the
// attributes want.
func (b *bundle) holdsExactly(email string, want m) {
	b.t.Helper()
	c := b.contact(email)
	if len(c.Attributes) != len(want) {
		b.t.Errorf("%s: attributes %v, want %v", email, c.Attributes, want)
	}
	for k, v := range want {
		if c.Attributes[k] != v {
			b.t.Errorf("%s: %s = %#v, want %#v", email, k, c.Attributes[k], v)
		}
	}
}

type m = map[string]any
