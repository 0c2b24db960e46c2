package mysql_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/mysql"
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
	var na *source.NoAnswerError
	if !errors.As(err, &na) || !errors.Is(err, source.ErrUnavailable) || errors.Is(err, source.ErrInvalid) {
		t.Fatalf("New on a locked table = %v, want a *source.NoAnswerError (source unavailable)", err)
	}
	for _, want := range []string{"no answer within 1s", "lock on the table", "SHOW PROCESSLIST"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New on a locked table: %q, want it to say %q", err, want)
		}
	}
}

// TestSetupWithoutAGreeting: a dsn whose port is another server's
// (PostgreSQL's or Redis's wait for the client to speak first) connects and
// then waits: the setup runs out of time while connecting, and says the
// server did not greet as MySQL, not that a table is locked.
func TestSetupWithoutAGreeting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn // silent: no greeting, until the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	dsn := "mysql://root@" + ln.Addr().String() + "/db"
	src, err := mysql.Kind{SetupTimeout: time.Second}.New(t.Context(), config.Source{Identity: "id", Spec: &mysql.Config{DSN: dsn, Table: "t"}}, "")
	if err == nil {
		src.Close()
		t.Fatal("New against a silent server succeeded")
	}
	var na *source.NoAnswerError
	if !errors.As(err, &na) || !errors.Is(err, source.ErrUnavailable) {
		t.Fatalf("New against a silent server = %v, want a *source.NoAnswerError (source unavailable)", err)
	}
	if !strings.Contains(err.Error(), "connect: no answer within 1s") || !strings.Contains(err.Error(), "no MySQL greeting") || strings.Contains(err.Error(), "lock") {
		t.Errorf("New against a silent server: %q, want it to say the server sent no MySQL greeting", err)
	}
}
