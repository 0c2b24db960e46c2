package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/web"
)

// daemonFlags are the flags of serve and worker.
type daemonFlags struct {
	config       string
	listen       string
	listenSet    bool
	workers      int
	retryBackoff time.Duration
}

// addDaemonFlags adds the flags serve and worker share.
func addDaemonFlags(cmd *cobra.Command, f *daemonFlags) {
	cmd.Flags().StringVarP(&f.config, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().IntVar(&f.workers, "workers", 4, "runs worked at once by this process")
	cmd.Flags().DurationVar(&f.retryBackoff, "retry-backoff", queue.BackoffBase,
		"wait before a failed run's second attempt; it doubles for each later one (±10 % jitter, 5 attempts; a store or lease failure's waits are 10 s, tripling, never longer)")
}

func newServeCmd(env Env, rf *rootFlags) *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--listen ADDR]",
		Short: "Run the scheduler, workers and the HTTP endpoints",
		Long: `Run syncs on their schedules: the scheduler enqueues a run of every active sync
at each tick of its cron schedule, and this process's workers run them. Any number
of serve and worker processes may share one store: one serve leads (it enqueues
schedules and the recovery sweep), every process works runs.

A run whose worker dies (kill -9, a lost machine) is found by lease-expiry
recovery within 10 s of its lease expiring and resumed from its last checkpoint
by any worker; the ledger keeps records from being sent twice. With redis: in
the config, leases live in Redis (and recovery reads them there); otherwise in
the store.

A failed run is retried up to 5 attempts, --retry-backoff (60 s) after the
first and doubling (±10 %); one the store or the lease store failed
(store_unavailable, lease_lost) 10 s after, tripling; permanent failures (bad
credentials, an invalid definition) are not retried. After every failed run the circuit breaker reads
the sync's last runs: when its last 5 failures that the sync's owner must fix
(owner: you, such as refused credentials or a bad mapping) came with no success
between them (settings.breaker_failures), it pauses the sync and alerts
(alerts: in the config). Failures the operator owns (a destination, the store
or Redis down) neither count nor break the streak: an outage pauses nothing.
A paused sync's schedule keeps ticking and runs nothing until a person resumes it.

Every hour at minute 13 the leader runs the dead-man check: every workspace
and every sync with no successful run in its window (deadman_window, 24h)
raises one critical alert, saying whether runs failed or none ran at all; the
first success sends a resolution notice. The sync pages show the silence.
Every check is recorded, and any serve or worker process runs the check
itself when none was recorded for 70 minutes (one process of all, through an
atomic claim), so a stopped leader does not silence the dead-man. A sync's
heartbeat_url is told of every success (and URL/fail of every failure), for a
monitor outside oncesync.

HTTP on --listen (default: web.listen of the config):
  /          the sync pages (sign in with a name from web.users)
  /api/v1    the JSON API (Authorization: Bearer <one of web.api_tokens>);
             its OpenAPI document is /api/v1/openapi.json
  /metrics   Prometheus metrics (bearer token or signed in)
  /riverui/  River's own UI over the queue (signed in)
  /healthz   200 "ok" while the process runs (no authentication)
  /readyz    200 when the store answers, 503 otherwise (no authentication)

SIGTERM or SIGINT: stop taking runs; every run in flight finishes its page,
checkpoints, releases its lease and is handed back to the queue (any worker
resumes it at once) within 15 s; the process exits by 25 s whatever still
runs. A second signal stops at once.`,
		Example: `  oncesync serve --config oncesync.yaml
  oncesync serve --config /etc/oncesync/oncesync.yaml --listen 0.0.0.0:8080 --workers 8`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.listenSet = cmd.Flags().Changed("listen")
			return runDaemon(cmd.Context(), env, rf, f, true)
		},
	}
	addDaemonFlags(cmd, &f)
	cmd.Flags().StringVar(&f.listen, "listen", "", "HTTP address (default: web.listen of the config, else "+config.DefaultListen+")")
	return cmd
}

// runDaemon is serve (scheduler true) and worker (false).
func runDaemon(ctx context.Context, env Env, rf *rootFlags, f daemonFlags, scheduler bool) error {
	name := "worker"
	if scheduler {
		name = "serve"
	}
	cfg, err := loadConfig(env, f.config)
	if err != nil {
		return err
	}
	if scheduler {
		f.listen = serveListen(cfg, f.listen, f.listenSet)
	}
	if f.workers < 1 {
		return exit(ExitUsage, fmt.Errorf("--workers must be at least 1, not %d", f.workers))
	}
	if f.retryBackoff < 10*time.Millisecond {
		return exit(ExitUsage, fmt.Errorf("--retry-backoff must be at least 10ms, not %s", f.retryBackoff))
	}
	log := rf.logger(env.Stderr)
	clk := clock.Real{}

	// Leases: Redis when the config names it (several machines), else the
	// store's SQL lease; lease-expiry recovery reads the same place. One
	// Redis client (if any) serves leases, dead-man markers and barriers,
	// and one alert dispatcher the circuit breaker.
	noticeNewStore(env, cfg)
	a, err := app.Open(ctx, app.OpenParams{Config: cfg, Clock: clk, Logger: log})
	if err != nil {
		return failed(env, err)
	}
	// exitBy is when the process must be gone once a stop signal came
	// (docs/guide.md#commands): every wait on the way out (runs, heartbeats,
	// alerts, HTTP) fits before it.
	var exitBy time.Time
	outWait := func(wait time.Duration) (context.Context, context.CancelFunc) {
		if !exitBy.IsZero() {
			wait = min(wait, exitBy.Sub(clk.Now()))
		}
		return context.WithTimeout(context.WithoutCancel(ctx), wait)
	}
	defer func() {
		actx, cancel := outWait(app.AlertWait)
		defer cancel()
		a.Close(actx)
	}()
	st, rdb, leases, alerts := a.Store, a.Redis, a.Leases, a.Alerts
	var inspector queue.LeaseInspector // nil: the store's SQL lease
	if a.RedisLeases != nil {
		inspector = queue.LeaseInspectorFunc(a.RedisLeases.Get)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		alerts.Collector())

	// The dead-man check (docs/guide.md#telling-silence-from-outside): the leader runs it at minute 13 of every
	// hour; any process may work the job.
	host, _ := os.Hostname()
	checker, err := app.Deadman(app.DeadmanParams{
		Config: cfg, Store: st, Notifier: alerts, Clock: clk, Logger: log, Registerer: reg, Redis: rdb,
		Who: fmt.Sprintf("%s %s pid %d", name, host, os.Getpid()),
	})
	if err != nil {
		return failed(env, failure.Wrap(failure.StoreUnavailable, err, "set up the dead-man check"))
	}
	// Heartbeats (docs/guide.md#telling-silence-from-outside) go out in the background; the way out gives the
	// ones in flight a moment, after the runs stopped.
	beats := deadman.NewHeartbeats(deadman.HeartbeatParams{Logger: log})
	defer func() {
		hctx, hcancel := outWait(5 * time.Second)
		defer hcancel()
		_ = beats.Close(hctx)
	}()
	svc, err := queue.New(ctx, queue.Params{
		Config:         cfg,
		Store:          st,
		Leases:         leases,
		LeaseInspector: inspector,
		Breaker:        breaker.New(breaker.Params{Store: st, Notifier: alerts, Logger: log, Link: app.SyncLink(cfg)}),
		Deadman:        checker,
		Heartbeats:     beats,
		Redis:          queueRedis(rdb),
		Logger:         log,
		Clock:          clk,
		Workers:        f.workers,
		Scheduler:      scheduler,
		Registerer:     reg,
		RetryBackoff:   f.retryBackoff,
		Accounts:       a.Accounts,
	})
	if err != nil {
		return failed(env, err)
	}

	var httpSrv *http.Server
	var addr string
	if f.listen != "" {
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return exit(ExitUsage, listenAdvice(f.listen, fmt.Errorf("--listen %s: %w", f.listen, err)))
		}
		addr = ln.Addr().String()
		var ui http.Handler
		if scheduler {
			riverUI, err := svc.RiverUI(ctx, "/riverui")
			if err != nil {
				return failed(env, failure.Wrap(failure.StoreUnavailable, err, "set up River's UI"))
			}
			deadLetters, requeue := webDeadLetters(st, svc.Enqueue)
			ui, err = web.New(web.Params{
				// River's UI takes small JSON bodies; 1 MiB bounds what a
				// client can make serve buffer.
				Extra:       map[string]http.Handler{"/riverui/": http.MaxBytesHandler(riverUI, 1<<20)},
				DeadLetters: deadLetters,
				Requeue:     requeue,
				Store:       st, Logger: log, Clock: clk,
				APITokens: webTokens(cfg.Web), Users: webUsers(cfg.Web), OIDC: webOIDC(cfg.Web), Secure: cfg.Web.HTTPS(),
				Enqueue: func(ctx context.Context, syncID, reason string) error {
					e, err := svc.Enqueue(ctx, syncID, reason)
					if err == nil && e.Duplicate {
						return web.ErrAlreadyQueued
					}
					return webQueueError(syncID, err)
				},
				Resend: func(ctx context.Context, syncID string) error {
					_, err := svc.EnqueueResend(ctx, syncID)
					return webQueueError(syncID, err)
				},
				Metrics:        reg,
				DescribeCursor: cfg.DescribeCursor,
				Configured:     func(syncID string) bool { _, ok := cfg.Sync(syncID); return ok },
				Check: func(ctx context.Context, syncID string) ([]string, error) {
					sc, err := configured(cfg, syncID)
					if err != nil {
						return nil, err
					}
					return checkSync(ctx, cfg, sc)
				},
				Preview: func(ctx context.Context, syncID string) (web.PreviewView, error) {
					sc, err := configured(cfg, syncID)
					if err != nil {
						return web.PreviewView{}, err
					}
					pv, err := previewSync(ctx, cfg, st, sc, previewOpts{}, nil)
					return web.PreviewView{From: previewFrom(cfg, syncID, pv), Read: pv.Read, Creates: pv.Creates, Updates: pv.Updates,
						Unchanged: pv.Unchanged, Settling: pv.Settling, CreateSample: pv.CreateSample, UpdateSample: pv.UpdateSample,
						SettlingSample: pv.SettlingSample, Rejected: pv.Rejected, RejectedSample: pv.RejectedSample,
						Mirror: sc.Destination.EffectiveWriteMode() == config.WriteMirror, Removals: removalText(pv, false)}, err
				},
				Silence: func(ctx context.Context) (map[string]string, error) {
					rep, err := checker.Evaluate(ctx)
					if err != nil {
						return nil, err
					}
					out := map[string]string{}
					for _, v := range rep.Verdicts {
						if v.Scope == deadman.ScopeSync && v.Status == deadman.StatusSilent {
							out[v.ID] = string(v.Kind)
						}
					}
					return out, nil
				},
			})
			if err != nil {
				return failed(env, failure.Wrap(failure.InvalidSyncDefinition, err, "set up the web UI"))
			}
		}
		// A stalled client cannot hold a connection: headers in 10 s, the
		// whole request in 60 s; an idle keep-alive connection closes after
		// 2 min; a response (a Preview reads the whole source) in 10 min.
		httpSrv = &http.Server{Handler: daemonMux(st, reg, ui, cfg.Web.HTTPS()), ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: 60 * time.Second, WriteTimeout: 10 * time.Minute, IdleTimeout: 2 * time.Minute}
		if cert, key := cfg.TLSFiles(); cert != "" {
			// serve's own TLS listener (web.tls_cert, web.tls_key): the
			// files are read now, so a wrong path fails at start-up.
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return exit(ExitUsage, fmt.Errorf("web.tls_cert/web.tls_key: %w", err))
			}
			httpSrv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
			ln = tls.NewListener(ln, httpSrv.TLSConfig)
		}
		// The config's syncs are in the store before the first page is
		// served: a sync's page answers 404 only for a sync there is not.
		if ui != nil {
			if err := svc.Publish(ctx); err != nil {
				return failed(env, err)
			}
		}
		go func() { _ = httpSrv.Serve(ln) }()
		defer httpSrv.Close()
	}

	// Signals are watched before the queue starts: a SIGTERM at start-up
	// still drains.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	if err := svc.Start(ctx); err != nil {
		return failed(env, err)
	}
	fmt.Fprintln(env.Stdout, startLine(name, cfg, f, scheduler, svc.Where(), addr))
	if n := signInNotice(cfg); scheduler && addr != "" && n != "" {
		fmt.Fprintln(env.Stdout, n)
	}

	// The dead-man check's fallback (docs/guide.md#telling-silence-from-outside): whatever stopped the leader's
	// hourly check, this process runs one when none was recorded for
	// deadman.FallbackAfter; the claim makes it one process of all.
	fbCtx, fbStop := context.WithCancel(ctx)
	fbDone := make(chan struct{})
	go func() {
		defer close(fbDone)
		checker.RunFallback(fbCtx, deadman.FallbackParams{})
	}()
	defer func() { fbStop(); <-fbDone }()

	select {
	case <-sigs:
	case <-ctx.Done():
	}
	fbStop()
	fmt.Fprintf(env.Stderr, "stopping: runs in flight finish their page and checkpoint (up to %s); exit by %s\n",
		queue.DrainDeadline, queue.ExitDeadline)
	exitBy = clk.Now().Add(queue.ExitDeadline)
	sctx, cancel := outWait(queue.ExitDeadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Shutdown(sctx) }()
	select {
	case err = <-done:
	case <-sigs:
		fmt.Fprintln(env.Stderr, "second signal: stopping at once")
		os.Exit(ExitFailed)
	}
	if err != nil {
		// Runs may still hold the store: exit without waiting on them.
		fmt.Fprintf(env.Stderr, "%s: stopped at the exit deadline with runs still going: %v\n", name, err)
		os.Exit(ExitFailed)
	}
	if httpSrv != nil {
		hctx, hcancel := outWait(time.Second)
		_ = httpSrv.Shutdown(hctx)
		hcancel()
	}
	fmt.Fprintf(env.Stderr, "%s: stopped\n", name)
	return nil
}

// daemonMux serves /healthz and /readyz without authentication, and either
// the web UI, JSON API and /metrics behind authentication (serve) or /metrics
// alone (worker, whose --listen should stay on a private address). secure
// (web.secure, or serve's TLS listener) sends HSTS on every response, the
// probes' included, as the web UI's own do.
func daemonMux(st store.Store, reg *prometheus.Registry, ui http.Handler, secure bool) http.Handler {
	mux := http.NewServeMux()
	var h http.Handler = mux
	if secure {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Strict-Transport-Security", "max-age=31536000")
			mux.ServeHTTP(w, r)
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if _, err := st.ListSyncs(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "store unavailable: %s\n", failure.Lookup(failure.StoreUnavailable).NextStep)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if ui != nil {
		mux.Handle("/", ui) // includes /metrics, behind a bearer token or a session
		return h
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return h
}

// startLine is the one line serve and worker print at start.
func startLine(name string, cfg *config.Config, f daemonFlags, scheduler bool, queueWhere, addr string) string {
	scheduled := 0
	for _, s := range cfg.Syncs {
		if s.Schedule != "" {
			scheduled++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "oncesync %s: ", name)
	if scheduler {
		fmt.Fprintf(&b, "scheduler (%d of %d syncs on a schedule) and ", scheduled, len(cfg.Syncs))
	}
	fmt.Fprintf(&b, "%d workers; store %s; queue %s; leases %s", f.workers, storeWhere(cfg), queueWhere, leaseWhere(cfg))
	if addr != "" {
		scheme := "http"
		if cert, _ := cfg.TLSFiles(); cert != "" {
			scheme = "https"
		}
		if scheduler {
			fmt.Fprintf(&b, "; %s://%s (web UI, /api/v1, /metrics; /healthz /readyz)", scheme, addr)
		} else {
			fmt.Fprintf(&b, "; %s://%s (/healthz /readyz /metrics)", scheme, addr)
		}
	}
	return b.String()
}

// signInNotice says, when the config lets nobody in, that the web UI's
// sign-in page and /api/v1 will refuse everyone, and what to set: a first
// serve otherwise shows a sign-in form no name passes, with no word why.
func signInNotice(cfg *config.Config) string {
	ui := len(cfg.Web.Users) > 0 || cfg.Web.OIDC != nil
	api := len(cfg.Web.APITokens) > 0
	switch {
	case !ui && !api:
		return "notice: nobody can sign in to the web UI or call /api/v1 and /metrics: set web.users (or web.oidc) and web.api_tokens (docs/guide.md#the-sync-pages-and-the-api)"
	case !ui:
		return "notice: nobody can sign in to the web UI (only web.api_tokens are set, for /api/v1 and /metrics): set web.users or web.oidc (docs/guide.md#the-sync-pages-and-the-api)"
	}
	return ""
}

// leaseWhere names where leases live, without secrets.
func leaseWhere(cfg *config.Config) string {
	if cfg.Redis == "" {
		return "in the store"
	}
	u, err := url.Parse(cfg.Redis)
	if err != nil {
		return "redis (unparsable URL)"
	}
	return "redis " + u.Redacted()
}

// storeWhere names the config's store without secrets.
func storeWhere(cfg *config.Config) string {
	u, err := url.Parse(cfg.Store)
	if err != nil {
		return "(unparsable store URL)"
	}
	if u.Scheme == "sqlite" {
		return cfg.Store
	}
	return u.Redacted()
}

// webDeadLetters lets the sync page list a sync's parked partition work and
// re-queue it with queue.RequeueDeadLetter (as `oncesync deadletter requeue`
// does): a new run of the sync is queued (the parked run's barrier snapshot
// is stale by definition), then the entry is marked. Nil when the store
// keeps none.
func webDeadLetters(st store.Store, enqueue func(ctx context.Context, syncID, reason string) (queue.Enqueued, error)) (func(context.Context, string) ([]web.DeadLetter, error), func(context.Context, web.RequeueParams) error) {
	dls, ok := st.(barrier.DeadLetters)
	if !ok {
		return nil, nil
	}
	list := func(ctx context.Context, syncID string) ([]web.DeadLetter, error) {
		entries, err := dls.ListDeadLetters(ctx, barrier.ListDeadLettersParams{SyncID: syncID, Limit: 100})
		if err != nil {
			return nil, err
		}
		out := make([]web.DeadLetter, 0, len(entries))
		for _, d := range entries {
			out = append(out, web.DeadLetter{
				ID: strconv.FormatInt(d.ID, 10), RunID: d.RunID, Partition: d.Partition, Code: d.Reason,
				Detail: fmt.Sprintf("the source's snapshot did not match the run's after %d checks", d.Attempts),
				At:     d.CreatedAt,
			})
		}
		return out, nil
	}
	requeue := func(ctx context.Context, p web.RequeueParams) error {
		id, err := strconv.ParseInt(p.ID, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: dead letter %q", store.ErrNotFound, p.ID)
		}
		_, err = queue.RequeueDeadLetter(ctx, queue.RequeueParams{
			DeadLetters: dls, Store: st, Enqueue: enqueue, ID: id, By: p.By, SyncID: p.SyncID,
		})
		switch {
		case errors.Is(err, queue.ErrSyncPaused), errors.Is(err, barrier.ErrAlreadyRequeued):
			return fmt.Errorf("%w: %w", web.ErrConflict, err)
		case errors.Is(err, queue.ErrUnknownSync):
			return fmt.Errorf("%w: %w", store.ErrNotFound, err)
		}
		return err
	}
	return list, requeue
}

// queueRedis passes the process's Redis client to the queue, or none (a nil
// *redis.Client must not become a non-nil interface).
func queueRedis(c *redis.Client) redis.Scripter {
	if c == nil {
		return nil
	}
	return c
}

// configured is sync id of the server's config, or web.ErrConflict for a
// sync the store knows that was removed from the config: its page shows
// it (the web answers a sync the store does not know before this), so
// "no such sync" would be untrue.
func configured(cfg *config.Config, id string) (*config.Sync, error) {
	sc, ok := cfg.Sync(id)
	if !ok {
		return nil, notConfigured(id)
	}
	return sc, nil
}

func notConfigured(id string) error {
	return fmt.Errorf("%w: sync %s is not in this server's config (removed from it?); add it back to run, check or preview it", web.ErrConflict, id)
}

// webQueueError maps the queue's refusals of a run to the web's: conflicts
// the person can act on, with the reason.
func webQueueError(syncID string, err error) error {
	switch {
	case errors.Is(err, queue.ErrUnknownSync):
		return notConfigured(syncID)
	case errors.Is(err, queue.ErrRunPending), errors.Is(err, queue.ErrPartitionedResend):
		return fmt.Errorf("%w: %w", web.ErrConflict, err)
	}
	return err
}

// webTokens, webUsers and webOIDC hand serve's web.api_tokens, web.users
// and web.oidc to the web tier (config has validated the roles).
func webTokens(w config.Web) []web.Token {
	var out []web.Token
	for _, t := range w.APITokens {
		out = append(out, web.Token{Name: t.Name, Secret: t.Token, Access: webAccess(t.Access)})
	}
	return out
}

func webUsers(w config.Web) map[string]web.User {
	out := map[string]web.User{}
	for name, u := range w.Users {
		out[name] = web.User{Hash: u.Hash, Access: webAccess(u.Access)}
	}
	return out
}

func webAccess(a config.Access) web.Access {
	r, _ := web.ParseRole(a.Role)
	return web.Access{Role: r, Workspaces: a.Workspaces}
}

func webOIDC(w config.Web) *web.OIDCParams {
	if w.OIDC == nil {
		return nil
	}
	o := w.OIDC
	return &web.OIDCParams{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RolesClaim: o.RolesClaim, WorkspacesClaim: o.WorkspacesClaim, RedirectURL: o.RedirectURL, Scopes: o.Scopes}
}

// serveListen is the address serve listens on: --listen when set, else
// web.listen, else its default. --listen also becomes cfg's web.listen, so
// that serve's alerts link to where it listens when web.url is unset (they
// linked to web.listen's address: an independent check, 2026-12-06).
func serveListen(cfg *config.Config, flag string, set bool) string {
	if !set {
		return cmp.Or(cfg.Web.Listen, config.DefaultListen)
	}
	cfg.Web.Listen = flag
	return flag
}

// listenAdvice adds to err, a failure to listen on addr, what to do when
// another process holds the address (it said what happened only).
func listenAdvice(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: another process already listens on %s: stop it, or give --listen another address (port 0 picks a free one)", err, addr)
	}
	return err
}
