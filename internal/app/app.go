// Package app is the wiring: it assembles a sync from its config (store,
// source, destination and the runner's view of the sync), opens the store
// driver and the leases. The page pipeline itself is internal/runner.
package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/rediserr"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/postgres"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// OpenStore opens the config's store: SQLite (relative paths are relative to
// the config file's directory) or PostgreSQL. A PostgreSQL URL may name the
// schema holding oncesync's tables (and the queue's) with a search_path
// parameter, e.g. postgres://db/app?search_path=oncesync_prod; the default is
// postgres.DefaultSchema.
func OpenStore(ctx context.Context, cfg *config.Config, clk clock.Clock) (store.Store, error) {
	switch {
	case strings.HasPrefix(cfg.Store, "sqlite:"):
		path, err := SQLitePath(cfg)
		if err != nil {
			return nil, failure.Wrap(failure.InvalidSyncDefinition, err, "store is not a valid sqlite URL")
		}
		st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: path, Clock: clk})
		if err != nil {
			return nil, failure.Wrap(failure.StoreUnavailable, err, "open the SQLite store")
		}
		return st, nil
	case postgres.IsURL(cfg.Store):
		// Machines' clocks may disagree: leases go on the server's, unless a
		// test's fake clock drives them.
		_, wall := clk.(clock.Real)
		st, err := postgres.Open(ctx, postgres.OpenParams{URL: cfg.Store, Clock: clk, Schema: StoreSchema(cfg.Store),
			ServerTime: wall})
		if reason, ok := postgres.InvalidReason(err); ok {
			// A schema or URL the store refuses is the config's to fix, not
			// a store to restore (docs/config.md#top-level).
			return nil, failure.Wrap(failure.InvalidSyncDefinition, err, "store: %s", reason)
		}
		if err != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
			// The store's own advice read "check that it runs and accepts
			// connections": the socket was the process's to refuse. Said as
			// the SQLite store says it (docs/recovery.md#too_many_open_files).
			return nil, &failure.Error{Code: failure.StoreUnavailable, Err: err, Detail: "open the PostgreSQL store: " +
				"this process has as many files and connections open as its open-files limit allows (ulimit -n, systemd's " +
				"LimitNOFILE): raise it, or run fewer workers (docs/recovery.md#too_many_open_files)"}
		}
		if err != nil {
			return nil, failure.Wrap(failure.StoreUnavailable, err, "open the PostgreSQL store")
		}
		return st, nil
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, "store must be a sqlite:// or postgres:// URL")
	}
}

// PostgresSessionSettings moves a PostgreSQL pool's session settings (a
// search_path in the store URL, ...) out of its startup packet, as the
// store's own pool does, for the queue's pool on the same URL: PgBouncer
// refuses startup parameters it does not know
// (docs/guide.md#postgresql-behind-a-connection-pooler).
func PostgresSessionSettings(cfg *pgxpool.Config) { postgres.SetAfterConnect(cfg) }

// PostgresAdvised is err of the queue's pool with the advice the store
// gives for the same error (a statement_timeout, a full server, a refused
// password), so that a worker that cannot open its queue says why.
func PostgresAdvised(err error) error { return postgres.Advised(err) }

// PostgresFirstAnswer runs a first statement on the queue's pool within
// timeout, as the store does when it opens, so a pooler whose pool is full
// is named in seconds rather than after its query_wait_timeout
// (docs/guide.md#postgresql-behind-a-connection-pooler).
func PostgresFirstAnswer(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration) error {
	return postgres.FirstAnswer(ctx, pool, timeout)
}

// SQLitePath is the file of cfg's sqlite:// store, a relative path resolved
// against the config file's directory.
func SQLitePath(cfg *config.Config) (string, error) {
	path, err := sqlite.ParseURL(cfg.Store)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(path) && cfg.Path != "" {
		path = filepath.Join(filepath.Dir(cfg.Path), path)
	}
	return path, nil
}

// NewSQLiteStore reports whether cfg's store is a SQLite file that does not
// exist yet (opening it creates an empty store), and its path.
func NewSQLiteStore(cfg *config.Config) (path string, isNew bool) {
	path, err := SQLitePath(cfg) // an error for any other store
	if err != nil {
		return "", false
	}
	_, err = os.Stat(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return path, false
	}
	// In a directory that does not exist no store is created: the open
	// fails and says so; a notice that one "is created there" said the
	// opposite (an independent check, 2026-12-06).
	fi, err := os.Stat(filepath.Dir(path))
	return path, err == nil && fi.IsDir()
}

// StoreSchema returns the schema a postgres:// store URL names with its
// search_path parameter (the first entry of the list), or "" for the default.
func StoreSchema(storeURL string) string {
	u, err := url.Parse(storeURL)
	if err != nil {
		return ""
	}
	sp := u.Query().Get("search_path")
	first, _, _ := strings.Cut(sp, ",")
	return strings.Trim(strings.TrimSpace(first), `"`)
}

// Redis returns a client for the config's `redis`, checked with a PING, or
// nil when the config names none. One client serves the process: leases,
// dead-man markers and checkpoint barriers. The caller closes it.
func Redis(ctx context.Context, cfg *config.Config) (*redis.Client, error) {
	if cfg.Redis == "" {
		return nil, nil
	}
	opts, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return nil, failure.New(failure.InvalidSyncDefinition, "redis is not a valid redis:// URL")
	}
	// A call's context deadline bounds its socket I/O too, not only
	// ReadTimeout: a lease renewal must not hang past the lease (docs/guide.md#the-store-and-the-leases).
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		// rediserr says what a refusal means (a password, a loading Redis):
		// "reach" alone sends a person to look at the network.
		err = rediserr.Wrap(ctx, "ping", err)
		var a failure.Adviser
		switch {
		case opts.TLSConfig != nil && untrustedCert(err):
			// The advice below sent a person whose Redis speaks TLS with a
			// private CA to turn TLS off.
			err = store.WithAdvice(err, "redis is a rediss:// URL and Redis's TLS certificate was refused ("+certReason(err)+
				"): give the CA that signed it with SSL_CERT_FILE or SSL_CERT_DIR (docs/guide.md#redis-in-production)")
		case errors.Is(err, syscall.ECONNREFUSED):
			// Nothing listens: with rediss:// the advice below sent a
			// person to turn TLS off, with redis:// the detail named the
			// address alone.
			err = store.WithAdvice(err, "nothing listens at "+opts.Addr+
				": start Redis, or correct the host and port in redis (docs/guide.md#redis-in-production)")
		case strings.Contains(err.Error(), "DB index is out of range"):
			// Redis answered: "reach" and the catalog's "could not be
			// reached" sent a person to the network.
			err = store.WithAdvice(err, fmt.Sprintf("Redis at %s has no database %d (the number at the end of redis's URL): it has as many as its databases "+
				"setting says (16 unless changed: 0 to 15); choose one of those, or raise databases (docs/guide.md#redis-in-production)", opts.Addr, opts.DB))
		case strings.Contains(err.Error(), "SELECT is not allowed in cluster mode"):
			err = store.WithAdvice(err, fmt.Sprintf("Redis at %s is a Redis Cluster node, which has only database 0: end redis's URL with /0 (docs/guide.md#redis-in-production)", opts.Addr))
		case strings.Contains(err.Error(), "redis: invalid reply"):
			// Another server's greeting (MySQL's) read as a reply.
			err = store.WithAdvice(err, "something answers at "+opts.Addr+" but does not speak Redis's protocol: "+
				"is that port another server's (3306 is MySQL's, 5432 PostgreSQL's)? correct the host and port in redis (docs/guide.md#redis-in-production)")
		case opts.TLSConfig == nil && errors.Is(err, io.EOF):
			// A server that reads a Redis command as garbage (PostgreSQL)
			// hangs up without a word, as does a Redis that wants TLS.
			err = store.WithAdvice(err, "something at "+opts.Addr+" accepted the connection and closed it without an answer: "+
				"it may be another server (3306 is MySQL's, 5432 PostgreSQL's), a Redis that expects TLS there (use rediss://), "+
				"or a proxy or firewall cutting it; correct the host and port in redis (docs/guide.md#redis-in-production)")
		case opts.TLSConfig != nil && !errors.As(err, &a):
			// A plain Redis answers nothing to a TLS hello: the dial times out.
			err = store.WithAdvice(err, "redis is a rediss:// URL: if Redis does not speak TLS at that port, use redis:// (docs/guide.md#redis-in-production)")
		}
		return nil, failure.Wrap(failure.StoreUnavailable, err, "reach Redis at %s", opts.Addr)
	}
	// An evicted lease or barrier reads as a fresh start: refuse a Redis
	// that may evict keys unless the config accepts it (docs/config.md,
	// allow_evicting_redis).
	if err := barrier.CheckEvictionPolicy(ctx, client, cfg.AllowEvictingRedis); err != nil {
		client.Close()
		return nil, failure.Wrap(failure.StoreUnavailable, err, "check Redis at %s", opts.Addr)
	}
	// An ACL user without a command the scripts need failed every run's
	// lease with "take the sync's lease"; say which at start
	// (docs/guide.md#redis-in-production).
	if err := redislease.CheckAccess(ctx, client, cfg.RedisKeys()); err != nil {
		client.Close()
		return nil, failure.Wrap(failure.StoreUnavailable, err, "check Redis at %s", opts.Addr)
	}
	return client, nil
}

// untrustedCert reports whether err is a TLS certificate this process
// refused: an unknown authority, a name it does not hold, expired.
func untrustedCert(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
	)
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify)
}

// certReason is why the certificate was refused, in Go's words (they name
// the certificate's subject and the host asked for, no secret).
func certReason(err error) string {
	var verify *tls.CertificateVerificationError
	if errors.As(err, &verify) {
		return verify.Err.Error()
	}
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return unknown.Error()
	}
	return "not trusted"
}

// Leases returns the lease manager: Redis when client is set (several
// machines; see Redis), under keys, else the store's SQL lease (embedded mode). ttl is
// the deployment's lease TTL (settings.lease_ttl), which a Redis lease
// waits after noticing that Redis lost its data. inRedis is the manager
// again when it is Redis's, nil otherwise.
func Leases(st store.Store, client *redis.Client, keys rediskey.Space, ttl time.Duration) (m lease.Manager, inRedis *redislease.Manager) {
	if client == nil {
		return &lease.SQL{Store: st}, nil
	}
	rl := redislease.New(redislease.Params{Client: client, Store: st, Keys: keys, TTL: ttl})
	return rl, rl
}

// Options are what the process provides beyond the config.
type Options struct {
	Clock      clock.Clock
	HTTPClient *http.Client
	// Sleep is how destinations wait between in-run retries and for their
	// rate limit (nil: a timer). Tests shrink the waits with it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Connectors builds the source and destination (nil: connector.Default()).
	Connectors *connector.Registry
	// Accounts, when set, shares destination accounts' request budgets
	// (App.Accounts).
	Accounts destination.AccountPacer
}

// Built is an assembled sync.
type Built struct {
	Source      source.Source
	Destination destination.Destination
	Sync        runner.Sync
}

// Close closes the source and destination.
func (b *Built) Close() error {
	err := b.Source.Close()
	if derr := b.Destination.Close(); err == nil {
		err = derr
	}
	return err
}

// Build assembles sync s of cfg.
func Build(cfg *config.Config, s *config.Sync, o Options) (*Built, error) {
	reg := o.Connectors
	if reg == nil {
		reg = connector.Default()
	}
	src, err := buildSource(cfg, s, reg)
	if err != nil {
		var fe *failure.Error
		if !errors.As(err, &fe) {
			err = failure.Wrap(failure.InvalidSyncDefinition, err, "the source cannot be set up: %v", err)
		}
		return nil, err
	}
	dst, spec, err := buildDestination(s, o, reg)
	if err != nil {
		src.Close()
		var fe *failure.Error
		if !errors.As(err, &fe) {
			err = failure.Wrap(failure.InvalidSyncDefinition, err, "the destination cannot be set up: %v", err)
		}
		return nil, err
	}
	reads, err := s.SourceReadJSON()
	if err != nil {
		src.Close()
		dst.Close()
		return nil, failure.Wrap(failure.InvalidSyncDefinition, err, "the source's definition cannot be encoded: %v", err)
	}
	return &Built{
		Source:      src,
		Destination: dst,
		Sync: runner.Sync{
			ID:                         s.ID,
			Workspace:                  s.Workspace,
			PageSize:                   s.Source.PageSize,
			Identity:                   s.Source.Identity,
			SourceTimeout:              s.Source.Timeout,
			Mapping:                    spec,
			Reads:                      reads,
			Retention:                  s.EffectiveLedgerRetention(cfg.Settings),
			AllowRewriteAfterRetention: s.AllowRewriteAfterRetention,
			Mirror:                     mirrorOf(cfg, s),
			Skip:                       skipOf(s),
			DestinationPayload:         config.DestinationPayload(s.Destination),
			DestinationAddress:         config.DestinationAddress(s.Destination),
			Account:                    s.Destination.Account,
			Layout:                     layoutOf(s),
		},
	}, nil
}

// layoutOf says how s's slots are named and where they are kept
// (runner.Sync.Layout): its identity and partition count and, without an
// identity, its page size, since a row's slot is then its page's cursor and
// its place on the page.
func layoutOf(s *config.Sync) string {
	l := fmt.Sprintf("identity=%q partitions=%d", s.Source.Identity, max(s.Partitions, 1))
	if s.Source.Identity == "" {
		l += fmt.Sprintf(" page_size=%d", s.Source.PageSize)
	}
	return l
}

func buildSource(cfg *config.Config, s *config.Sync, reg *connector.Registry) (source.Source, error) {
	c, ok := reg.LookupSource(s.Source.Type)
	if !ok || s.Source.Spec == nil {
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("source type %q is not supported by this build", s.Source.Type))
	}
	dir := ""
	if cfg.Path != "" {
		dir = filepath.Dir(cfg.Path)
	}
	src, err := c.New(context.Background(), s.Source, dir)
	if err != nil {
		return nil, sourceSetupFailure(err)
	}
	return src, nil
}

// sourceSetupFailure maps a source's construction error to its code.
func sourceSetupFailure(err error) error {
	switch {
	case errors.Is(err, source.ErrUnavailable):
		return failure.Wrap(failure.SourceUnavailable, err, "%s", err.Error())
	case errors.Is(err, source.ErrAuth):
		return failure.Wrap(failure.SourceAuth, err, "%s", err.Error())
	case errors.Is(err, source.ErrInvalid):
		return failure.Wrap(failure.SourceQueryInvalid, err, "%s", err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		// A setup that ran out of time: the source did not answer, the
		// definition is not at fault.
		return failure.Wrap(failure.SourceUnavailable, err, "%s", err.Error())
	default:
		return failure.Wrap(failure.InvalidSyncDefinition, err, "%s", err.Error())
	}
}

func buildDestination(s *config.Sync, o Options, reg *connector.Registry) (destination.Destination, mapping.Spec, error) {
	c, ok := reg.Lookup(s.Destination.Type)
	if !ok || s.Destination.Spec == nil {
		return nil, mapping.Spec{}, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("destination type %q is not supported", s.Destination.Type))
	}
	return c.New(s.Destination, destination.Options{Clock: o.Clock, HTTPClient: o.HTTPClient, Sleep: o.Sleep, Accounts: o.Accounts})
}

// mirrorOf is the runner's view of a mirror sync's removals bound; nil
// when the sync is not a mirror.
func mirrorOf(cfg *config.Config, s *config.Sync) *runner.Mirror {
	if s.Destination.EffectiveWriteMode() != config.WriteMirror {
		return nil
	}
	bound := s.EffectiveMaxRemovals(cfg.Settings)
	return &runner.Mirror{MaxRemovals: bound.Of, Bound: bound.String()}
}

// skipOf is the reason s's write mode leaves records as the destination
// has them (runner.Sync.Skip).
func skipOf(s *config.Sync) string {
	switch s.Destination.EffectiveWriteMode() {
	case config.WriteCreate:
		return destination.SkipExists
	case config.WriteUpdate:
		return destination.SkipNotFound
	}
	return ""
}

// Publisher names who publishes a config's syncs, for their "publish"
// audit entries: the config file and this process (host and pid).
func Publisher(configPath string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("config %s (host %s, pid %d)", configPath, host, os.Getpid())
}
