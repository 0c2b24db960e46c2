package store

import (
	"context"
	"errors"
	"time"
)

// RetryFor calls fn until it succeeds, fails with an error again rejects,
// or limit has passed (on the wall clock: the contention it waits out is
// another process's), backing off from 5 ms to 200 ms; an ended ctx stops
// it with fn's last error joined to ctx's. A fresh SQLite file's first opens
// need it: while another process turns the file into WAL mode, SQLite
// answers SQLITE_BUSY at once instead of calling the busy handler, so
// busy_timeout alone does not make them wait.
func RetryFor(ctx context.Context, limit time.Duration, again func(error) bool, fn func() error) error {
	deadline := time.Now().Add(limit)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := fn()
		if err == nil || !again(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}
