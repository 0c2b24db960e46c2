package testenv

import (
	"context"
	"database/sql"
	"net/url"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// DefaultMySQLURL is the test MySQL/MariaDB when the environment names none.
const DefaultMySQLURL = "mysql://root@127.0.0.1:3306/"

// MySQLURL is the test MySQL or MariaDB: ONCESYNC_TEST_MYSQL_URL, or
// DefaultMySQLURL.
func MySQLURL() string { return envOr("ONCESYNC_TEST_MYSQL_URL", DefaultMySQLURL) }

// MySQLDatabase creates a database of its own for t on the test server
// (dropped when t ends) and returns its mysql:// URL and a connection pool
// to it for setting up data. A server that does not answer stops t
// (Unavailable).
func MySQLDatabase(t testing.TB) (dsn string, db *sql.DB) {
	t.Helper()
	u, err := url.Parse(MySQLURL())
	if err != nil || u.Scheme != "mysql" {
		t.Fatalf("ONCESYNC_TEST_MYSQL_URL must be a mysql:// URL")
	}
	admin, err := sql.Open("mysql", nativeDSN(u, ""))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		_ = admin.Close()
		Unavailable(t, "MySQL at %s unreachable (set ONCESYNC_TEST_MYSQL_URL): %v", u.Host, err)
	}
	name := "oncesync_" + RandHex(8)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		_ = admin.Close()
		t.Fatalf("create database: %v", err)
	}
	db, err = sql.Open("mysql", nativeDSN(u, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		_ = admin.Close()
	})
	d := *u
	d.Path = "/" + name
	return d.String(), db
}

// nativeDSN is the driver's DSN for u and database name, with
// multiStatements so a test can set up data in one Exec.
func nativeDSN(u *url.URL, name string) string {
	cfg := mysqldrv.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, name
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.MultiStatements = true
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	return cfg.FormatDSN()
}
