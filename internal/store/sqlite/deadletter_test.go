package sqlite

import (
	"testing"

	"github.com/oncesync/oncesync/internal/barrier/barriertest"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	barriertest.DeadLetterSuite(t, func(t *testing.T, clk clock.Clock) store.DeadLetters {
		s, _ := openTemp(t, clk)
		return s
	})
}
