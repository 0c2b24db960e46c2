package sqlite

import (
	"testing"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

func TestSessions(t *testing.T) {
	t.Parallel()
	storetest.SessionSuite(t, func(t *testing.T, clk *clock.Fake) store.Sessions {
		s, _ := openTemp(t, clk)
		return s
	})
}
