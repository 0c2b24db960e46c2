package postgres

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenNamesUnusableTLSFiles: the CA file of sslrootcert (sslcert,
// sslkey) is read when the URL is parsed. One at a wrong path, or not a PEM
// file, was reported as "the store URL is not a valid PostgreSQL connection
// string", which sends a person looking for a typo in the URL; the reason
// now names the file and what is wrong with it, never the password.
func TestOpenNamesUnusableTLSFiles(t *testing.T) {
	t.Parallel()
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{"/nonexistent/oncesync-ca.crt", "/nonexistent/oncesync-ca.crt: no such file or directory"},
		{notPEM, "unable to add CA to cert pool"},
	} {
		_, err := Open(t.Context(), OpenParams{URL: "postgres://u:s3cr3t-pw@db.example:5432/app?sslmode=verify-full&sslrootcert=" + c.file})
		reason, ok := InvalidReason(err)
		if !ok || !strings.Contains(reason, "sslrootcert") || !strings.Contains(reason, c.want) {
			t.Errorf("sslrootcert=%s: reason %q (%v), want it to name sslrootcert and %q", c.file, reason, err, c.want)
		}
		if strings.Contains(reason, "s3cr3t-pw") || strings.Contains(err.Error(), "s3cr3t-pw") {
			t.Errorf("sslrootcert=%s: the error shows the password: %v", c.file, err)
		}
	}
}
