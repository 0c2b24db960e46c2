package storetest

import (
	"context"

	"github.com/oncesync/oncesync/internal/store"
)

// CancelOnInsert is a real store whose InsertRun cancels the caller's
// context once the row is written, as a SIGTERM's drain deadline can while
// the statement is on the wire: the row is committed, the caller told
// "canceled". Tests of what starts a run use it.
type CancelOnInsert struct {
	store.Store
	Cancel context.CancelFunc
}

func (c CancelOnInsert) InsertRun(ctx context.Context, p store.InsertRunParams) (store.Run, error) {
	r, err := c.Store.InsertRun(ctx, p)
	c.Cancel()
	if ctx.Err() != nil {
		return store.Run{}, ctx.Err()
	}
	return r, err
}
