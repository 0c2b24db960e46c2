package deadman

import (
	"time"

	"github.com/oncesync/oncesync/internal/config"
)

// ConfigWindow returns the Params.Window of cfg: each sync's
// config.Sync.EffectiveDeadmanWindow (its deadman_window override, or
// settings.deadman_window); 0 (DefaultWindow) for a sync not in cfg.
func ConfigWindow(cfg *config.Config) func(syncID string) time.Duration {
	return func(syncID string) time.Duration {
		if sc, ok := cfg.Sync(syncID); ok {
			return sc.EffectiveDeadmanWindow(cfg.Settings)
		}
		return 0
	}
}
