package apiclient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// TestFrozenBeforeSendingSendsNothing: the process is stopped (SIGSTOP, a
// frozen VM) after the attempt's lease check and before its request left,
// and wakes past the attempt deadline, before the context's timer fired (the
// fake clock moves, the real timer does not). No server may receive the
// whole request: it would be a write after the lease, when another run may
// own the sync (docs/guide.md#a-run-that-was-frozen). The stop is modelled
// in the dial (a new connection) and in a body large enough to be sent in
// several writes (a stop between them).
func TestFrozenBeforeSendingSendsNothing(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"dial", "mid-body"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			var complete atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.ReadAll(r.Body); err == nil {
					complete.Add(1)
				}
			}))
			t.Cleanup(srv.Close)
			clk := clock.NewFake(t0)
			until := t0.Add(10 * time.Second)
			freeze := func() { clk.Advance(time.Minute) }
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if where == "dial" {
					freeze()
				}
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil || where == "dial" {
					return c, err
				}
				return &freezeOnWrite{Conn: c, freeze: freeze}, nil
			}}
			t.Cleanup(tr.CloseIdleConnections)
			c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) { p.Client = &http.Client{Transport: tr} })
			ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return until })
			req := post(srv.URL)
			req.Body = bytes.Repeat([]byte("x"), 256<<10) // many writes of the transport's buffer
			_, err := c.Do(ctx, req)
			wantCode(t, err, failure.LeaseLost)
			if !errors.Is(err, destination.ErrNoLeaseTime) {
				t.Errorf("error %v: want ErrNoLeaseTime", err)
			}
			if errors.Is(err, destination.ErrNotSent) {
				t.Errorf("error %v: its first bytes left, so it is in doubt, not ErrNotSent", err)
			}
			srv.Close() // waits for the handler
			if n := complete.Load(); n != 0 {
				t.Fatalf("the server received %d whole request(s) sent after the attempt deadline", n)
			}
		})
	}
}

// freezeOnWrite freezes (moves the fake clock) at its first write.
type freezeOnWrite struct {
	net.Conn
	freeze func()
	done   bool
}

func (c *freezeOnWrite) Write(p []byte) (int, error) {
	if !c.done {
		c.done = true
		c.freeze()
	}
	return c.Conn.Write(p)
}
