package app_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestRedisRefusesAnACLUserMissingCommands: a Redis user without EVALSHA
// (or whose scripts may not write) was accepted at start, and every run then
// failed store_unavailable with the detail "take the sync's lease" and
// nothing else. app.Redis now fails at start naming the commands; the
// password never shows.
func TestRedisRefusesAnACLUserMissingCommands(t *testing.T) {
	var servers testenv.RedisServers
	defer servers.Stop()
	addr, stop, err := servers.Start(t.TempDir())
	if errors.Is(err, testenv.ErrNoRedisServer) {
		testenv.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := t.Context()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	for user, rules := range map[string][]any{
		"full":      {"+@all", "~*"},
		"noevalsha": {"+@all", "-evalsha", "~*"},
	} {
		args := append([]any{"ACL", "SETUSER", user, "reset", "on", ">Pw-s3cret"}, rules...)
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	open := func(user string) error {
		c, err := app.Redis(ctx, &config.Config{Redis: "redis://" + user + ":Pw-s3cret@" + addr + "/0"})
		if c != nil {
			c.Close()
		}
		return err
	}
	if err := open("full"); err != nil {
		t.Fatalf("a user allowed every command: %v", err)
	}
	err = open("noevalsha")
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Code != failure.StoreUnavailable {
		t.Fatalf("a user without EVALSHA: %v, want store_unavailable", err)
	}
	if !strings.Contains(fe.Detail, "evalsha") || !strings.Contains(fe.Detail, "ACL SETUSER USER +evalsha") {
		t.Errorf("detail %q does not name the command", fe.Detail)
	}
	if strings.Contains(err.Error(), "Pw-s3cret") || strings.Contains(fe.Detail, "Pw-s3cret") {
		t.Errorf("the password shows: %v", err)
	}
}

// TestRedisTLSWithAPrivateCA: a rediss:// Redis whose certificate a
// private CA signed was refused with the advice "if Redis does not speak
// TLS at that port, use redis://", which sends a person to turn TLS off.
// The advice now names the refused certificate and how to give the CA.
func TestRedisTLSWithAPrivateCA(t *testing.T) {
	var servers testenv.RedisServers
	defer servers.Stop()
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	tlsAddr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	_, stop, err := servers.Start(dir, "--tls-port", tlsPort, "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-auth-clients", "no")
	if errors.Is(err, testenv.ErrNoRedisServer) {
		testenv.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Skipf("redis-server without TLS: %v", err)
	}
	defer stop()
	c, err := app.Redis(t.Context(), &config.Config{Redis: "rediss://:Pw-s3cret@" + tlsAddr + "/0"})
	if c != nil {
		c.Close()
		t.Fatal("a certificate of an unknown CA was accepted")
	}
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Code != failure.StoreUnavailable {
		t.Fatalf("app.Redis = %v, want store_unavailable", err)
	}
	if !strings.Contains(fe.Detail, "SSL_CERT_FILE") || strings.Contains(fe.Detail, "use redis://") {
		t.Errorf("detail %q: want how to give the CA, not to turn TLS off", fe.Detail)
	}
	if strings.Contains(err.Error(), "Pw-s3cret") {
		t.Errorf("the password shows: %v", err)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "redis test CA"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
