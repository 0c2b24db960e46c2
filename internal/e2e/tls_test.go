package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/oncesync/oncesync/internal/testenv"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir and
// returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oncesync test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// TestServeListensWithTLS: web.tls_cert and web.tls_key make serve answer
// over HTTPS only, with Secure cookies and HSTS.
func TestServeListensWithTLS(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 10, pageSize: 10, mode: "bulk"})
	pool := selfSigned(t, tb.dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(tb.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "web:\n  tls_cert: tls.crt\n  tls_key: tls.key\n  users:\n    alice: %q\n", hash)
	f.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := tb.start("serve", "--config", tb.config, "--listen", addr)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	testenv.WaitFor(t, 30*time.Second, "serve to listen with TLS", func() bool {
		res, err := c.Get("https://" + addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	res, err := c.Get("https://" + addr + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if hsts := res.Header.Get("Strict-Transport-Security"); !strings.Contains(hsts, "max-age=") {
		t.Errorf("no HSTS header on the TLS listener: %q", hsts)
	}
	for _, ck := range res.Cookies() {
		if !ck.Secure {
			t.Errorf("cookie %s is not Secure on the TLS listener", ck.Name)
		}
	}
	if plain, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz"); err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Error("serve answered plain HTTP on its TLS listener")
		}
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 40*time.Second); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, p.Out)
	}
	if !strings.Contains(p.Out.String(), "https://"+addr) {
		t.Errorf("serve's start line does not give its https address:\n%s", p.Out)
	}
}
