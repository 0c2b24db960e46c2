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

// ConfigSyncs returns the Params.Configured of cfg: whether a sync id is one
// of cfg's syncs.
func ConfigSyncs(cfg *config.Config) func(syncID string) bool {
	// A set, built once: a check asks about every sync of the store.
	ids := make(map[string]struct{}, len(cfg.Syncs))
	for i := range cfg.Syncs {
		ids[cfg.Syncs[i].ID] = struct{}{}
	}
	return func(syncID string) bool {
		_, ok := ids[syncID]
		return ok
	}
}
