package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/store"
)

// DeadmanParams assemble the dead-man checker of docs/guide.md#telling-silence-from-outside.
type DeadmanParams struct {
	Config   *config.Config
	Store    store.Store
	Notifier deadman.Notifier
	Clock    clock.Clock
	Logger   *slog.Logger
	// Link returns the page of a workspace or sync (nil: PageLink(Config)).
	Link func(workspace, syncID string) string
	// Registerer, when set, gets oncesync_deadman_alerts_total{kind}.
	Registerer prometheus.Registerer
	// Redis, when set (see Redis), keeps the markers and the record of the
	// last check; else the store does.
	Redis *redis.Client
	// Who names the checker in that record (deadman.Params.Who).
	Who string
	// DeliveryWait is deadman.Params.DeliveryWait (0: its default).
	DeliveryWait time.Duration
}

// countingNotifier counts the dead-man alerts it passes on.
type countingNotifier struct {
	next  deadman.Notifier
	count *prometheus.CounterVec
}

func (n countingNotifier) Notify(ctx context.Context, a alert.Alert) (alert.Alert, error) {
	out, err := n.next.Notify(ctx, a)
	if err == nil {
		n.count.WithLabelValues(a.Kind).Inc()
	}
	return out, err
}

// Send passes deadman.Confirmer on, so counting keeps the check's wait for
// delivery (without one, it is Notify with no Delivery to wait on).
func (n countingNotifier) Send(ctx context.Context, a alert.Alert) (alert.Alert, *alert.Delivery, error) {
	cf, ok := n.next.(deadman.Confirmer)
	if !ok {
		out, err := n.Notify(ctx, a)
		return out, nil, err
	}
	out, d, err := cf.Send(ctx, a)
	if err == nil {
		n.count.WithLabelValues(a.Kind).Inc()
	}
	return out, d, err
}

// Deadman returns the dead-man checker for the config: markers in Redis when
// p.Redis is set, else in the store.
func Deadman(p DeadmanParams) (*deadman.Checker, error) {
	if p.Link == nil {
		p.Link = PageLink(p.Config)
	}
	ds, ok := p.Store.(deadman.Store)
	if !ok {
		return nil, fmt.Errorf("the %T store cannot answer the dead-man check", p.Store)
	}
	var markers deadman.MarkerStore
	if p.Redis != nil {
		markers = deadman.NewRedisMarkers(p.Redis, p.Config.RedisKeys())
	} else if ms, ok := p.Store.(deadman.MarkerStore); ok {
		markers = ms
	} else {
		return nil, fmt.Errorf("the %T store cannot keep dead-man markers", p.Store)
	}
	notifier := p.Notifier
	if p.Registerer != nil {
		cv := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncesync_deadman_alerts_total",
			Help: "Dead-man alerts and resolution notices sent, by kind (docs/guide.md#telling-silence-from-outside).",
		}, []string{"kind"})
		for _, k := range []string{alert.KindDeadmanNoRuns, alert.KindDeadmanRunsWithoutSuccess, alert.KindDeadmanResolved} {
			cv.WithLabelValues(k)
		}
		if err := p.Registerer.Register(cv); err != nil {
			return nil, err
		}
		notifier = countingNotifier{next: notifier, count: cv}
	}
	c, err := deadman.New(deadman.Params{
		Store: ds, Markers: markers, Notifier: notifier, Clock: p.Clock, Logger: p.Logger,
		DefaultWindow: p.Config.Settings.DeadmanWindow, Window: deadman.ConfigWindow(p.Config), Link: p.Link,
		Who: p.Who, Configured: deadman.ConfigSyncs(p.Config), DeliveryWait: p.DeliveryWait,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// PageLink gives the page of a sync, or of a workspace when syncID is "",
// on serve's pages (web.url, else web.listen named by this machine's
// hostname): every alert links to it (docs/guide.md#guardrails, docs/config.md#web). A process
// that is not serve (oncesync run, a worker) links to serve's pages too:
// they show the same store.
func PageLink(cfg *config.Config) func(workspace, syncID string) string {
	host, _ := os.Hostname()
	return config.PageLink(cfg.Web.PageBase(host))
}

// SyncLink is PageLink for a sync's page (breaker.Params.Link).
func SyncLink(cfg *config.Config) func(syncID string) string {
	link := PageLink(cfg)
	return func(syncID string) string { return link("", syncID) }
}
