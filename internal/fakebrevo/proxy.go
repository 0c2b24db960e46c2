package fakebrevo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// Proxy is an http.Handler that checks every /v3 request it forwards, and the
// response it gets back, against Brevo's API spec. A non-conforming request
// is answered 400 invalid_parameter (with the validation message) without
// being forwarded; a non-conforming response is passed through. Both are
// recorded (see Errors), so a client's tests can put a Proxy in front of the
// fake and assert that every request the client sent was valid. Paths outside
// /v3 (/_stats, /_reset) are forwarded unchecked.
type Proxy struct {
	v    *Validator
	next http.Handler

	mu      sync.Mutex
	errs    []error
	checked int
}

// ValidatingProxy returns a Proxy in front of next (typically a *Server).
func ValidatingProxy(next http.Handler) (*Proxy, error) {
	v, err := NewValidator()
	if err != nil {
		return nil, err
	}
	return &Proxy{v: v, next: next}, nil
}

// ValidatingProxyTo returns a Proxy in front of the server at target, its
// root URL (without /v3), e.g. http://127.0.0.1:8081.
// A connection the target cuts (DropResponseRate) is cut for the client too.
func ValidatingProxyTo(target *url.URL) (*Proxy, error) {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorHandler = func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) }
	return ValidatingProxy(rp)
}

// Errors returns the spec violations seen so far, oldest first.
func (p *Proxy) Errors() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.errs...)
}

// Err returns the spec violations seen so far joined, or nil.
func (p *Proxy) Err() error { return errors.Join(p.Errors()...) }

// Checked returns how many /v3 requests the proxy checked.
func (p *Proxy) Checked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checked
}

func (p *Proxy) record(err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != BasePath && !strings.HasPrefix(r.URL.Path, BasePath+"/") {
		p.next.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.checked++
	p.mu.Unlock()

	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Code: CodeBadRequest, Message: "request body could not be read"})
			return
		}
		_ = r.Body.Close()
		if len(b) > 0 {
			body = b
		}
	}
	if err := p.v.ValidateRequest(r, body); err != nil {
		p.record(err)
		writeJSON(w, http.StatusBadRequest, errorBody{Code: CodeInvalidParameter, Message: err.Error()})
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))

	tw := &teeWriter{ResponseWriter: w}
	p.next.ServeHTTP(tw, r)
	if tw.hijacked {
		return
	}
	status := tw.status
	if status == 0 {
		status = http.StatusOK
	}
	if err := p.v.ValidateResponse(r, status, tw.Header(), tw.buf.Bytes()); err != nil {
		p.record(err)
	}
}

// teeWriter copies the response it passes through.
type teeWriter struct {
	http.ResponseWriter
	status   int
	buf      bytes.Buffer
	hijacked bool
}

func (t *teeWriter) WriteHeader(code int) {
	if t.status == 0 {
		t.status = code
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *teeWriter) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	t.buf.Write(b)
	return t.ResponseWriter.Write(b)
}

// Hijack lets the fake's DropResponseRate cut the connection through the
// proxy.
func (t *teeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(t.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("fakebrevo: proxy: %w", err)
	}
	t.hijacked = true
	return conn, rw, nil
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
