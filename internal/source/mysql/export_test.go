package mysql

import "context"

// Classify is classify of a Source whose password is password.
func Classify(ctx context.Context, password string, err error) error {
	s := &Source{id: "mysql:test", password: password}
	return s.classify(ctx, "test", err)
}

// NormalizeQuery is normalizeQuery.
func NormalizeQuery(q string) string { return normalizeQuery(q) }

// RedactDSN is redactDSN.
func RedactDSN(dsn string) string { return redactDSN(dsn) }
