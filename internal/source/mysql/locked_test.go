package mysql_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/source/mysql"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestSetupOnALockedTable: a table another session holds with LOCK TABLES
// ... WRITE made the source's setup run out of time with "check: context
// deadline exceeded", reported as invalid_sync_definition. It is
// source.ErrUnavailable (retried), and says what may hold it.
func TestSetupOnALockedTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, "CREATE TABLE locked (id BIGINT PRIMARY KEY, email VARCHAR(191))", "INSERT INTO locked VALUES (1, 'a@example.com')")
	holder, err := b.admin.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(t.Context(), "LOCK TABLES locked WRITE"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = holder.ExecContext(context.Background(), "UNLOCK TABLES") }()

	src, err := mysql.Kind{SetupTimeout: time.Second}.New(t.Context(), config.Source{Identity: "id", Spec: &mysql.Config{DSN: b.dsn, Table: "locked"}}, "")
	if err == nil {
		src.Close()
		t.Fatal("New on a locked table succeeded")
	}
	sourcetest.WantNoAnswer(t, "New on a locked table", err, "check: no answer within 1s", "lock on the table", "SHOW PROCESSLIST")
}

// TestSetupWithoutAGreeting: a dsn whose port is another server's
// (PostgreSQL's or Redis's wait for the client to speak first) connects and
// then waits: the setup runs out of time while connecting, and says the
// server did not greet as MySQL, not that a table is locked.
func TestSetupWithoutAGreeting(t *testing.T) {
	t.Parallel()
	addr := testenv.ServeTCP(t, func(net.Conn) {}) // silent: no greeting
	dsn := "mysql://root@" + addr + "/db"
	src, err := mysql.Kind{SetupTimeout: time.Second}.New(t.Context(), config.Source{Identity: "id", Spec: &mysql.Config{DSN: dsn, Table: "t"}}, "")
	if err == nil {
		src.Close()
		t.Fatal("New against a silent server succeeded")
	}
	sourcetest.WantNoAnswer(t, "New against a silent server", err, "connect: no answer within 1s", "no MySQL greeting")
	if strings.Contains(err.Error(), "lock") {
		t.Errorf("New against a silent server: %q blames a lock", err)
	}
}
