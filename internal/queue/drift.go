package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

// Configuration drift between machines (docs/guide.md#one-config-on-every-machine).
// A run's job carries the fingerprint of the sync as the process that
// queued it defines it (the leader's tick, "run now" on a serve, a
// coordinator's partitions); the worker that takes the job runs it only if
// its own config defines the sync the same way. Otherwise the run is
// recorded failed with config_drift and nothing is written: a worker
// deployed by hand with an older mapping, another API key or another
// redis_namespace would otherwise write stale values, to another account,
// or under a second lease. A job without a fingerprint (queued by an
// oncesync from before 2026-12-05) is run as before.

// fingerprints caches each sync's fingerprint in this process's config.
type fingerprints struct {
	mu sync.Mutex
	m  map[string]string
}

// fingerprint is sc's fingerprint in this process's config; "" when it
// cannot be computed (the definition does not encode: the build fails and
// says why).
func (s *Service) fingerprint(sc *config.Sync) string {
	s.prints.mu.Lock()
	defer s.prints.mu.Unlock()
	if f, ok := s.prints.m[sc.ID]; ok {
		return f
	}
	f, err := sc.Fingerprint(cmp.Or(s.cfg.RedisNamespace, rediskey.DefaultNamespace))
	if err != nil {
		f = ""
	}
	if s.prints.m == nil {
		s.prints.m = map[string]string{}
	}
	s.prints.m[sc.ID] = f
	return f
}

// checkDrift refuses a job queued with fingerprint queued ("" is not
// checked) when this process defines sc otherwise: a config_drift failure
// naming this machine and the parts that differ (never their values).
func (s *Service) checkDrift(sc *config.Sync, queued string) error {
	if queued == "" {
		return nil
	}
	mine := s.fingerprint(sc)
	if mine == queued {
		return nil
	}
	return failure.New(failure.ConfigDrift, fmt.Sprintf(
		"sync %s in the config of this worker (%s, %s) differs from the config of the process that queued the run: %s differ; nothing was written",
		sc.ID, workerName(), s.cfg.Path, strings.Join(config.DriftParts(mine, queued), ", ")))
}

// missingSync is the failure of a job naming a sync this process's config
// does not have.
func (s *Service) missingSync(what string) error {
	return failure.New(failure.ConfigDrift, fmt.Sprintf("%s is not in the config of this worker (%s, %s); nothing was written", what, workerName(), s.cfg.Path))
}

// workerName names this process for an operator: its host and pid.
func workerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("host %s, pid %d", host, os.Getpid())
}

// keepPublished is what a worker (a process that never leads) publishes of
// defs: the syncs the store does not have yet, so that their pages exist.
// A published definition it would change is the leading serve's (or a
// foreground run's) and stays: a worker started with another config file
// used to overwrite it, so the sync page showed that worker's definition
// while serve queued runs with its own. Those syncs are logged, as the
// drift that runs queued by serve will be refused for (config_drift).
func (s *Service) keepPublished(ctx context.Context, defs []store.PutSyncParams) ([]store.PutSyncParams, error) {
	have, err := s.st.ListSyncs(ctx)
	if err != nil {
		return nil, failure.Wrap(failure.StoreUnavailable, err, "read the published syncs")
	}
	published := make(map[string]string, len(have))
	for _, sy := range have {
		published[sy.ID] = sy.Definition
	}
	var fresh []store.PutSyncParams
	var differ []string
	for _, d := range defs {
		cur, ok := published[d.ID]
		switch {
		case !ok:
			fresh = append(fresh, d)
		case cur != d.Definition && !onlyScheduleDiffers(cur, d.Definition):
			differ = append(differ, d.ID)
		}
	}
	if len(differ) > 0 {
		const shown = 20
		ids := strings.Join(differ[:min(len(differ), shown)], ", ")
		if len(differ) > shown {
			ids += fmt.Sprintf(" and %d more", len(differ)-shown)
		}
		s.log.Warn("this worker's config defines syncs otherwise than their published definitions (a serve's or a foreground run's config file differs from this one): "+
			"runs of them queued by a process with another config are refused with config_drift, and nothing is written (docs/guide.md#one-config-on-every-machine)",
			"syncs", ids, "config", s.cfg.Path)
	}
	return fresh, nil
}

// onlyScheduleDiffers reports whether two published definitions differ in
// their schedule alone, which only the leader reads and the fingerprint
// leaves out: runs of such a sync are not refused, so no warning says
// they would be.
func onlyScheduleDiffers(a, b string) bool {
	var x, y map[string]any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	delete(x, "schedule")
	delete(y, "schedule")
	return reflect.DeepEqual(x, y)
}
