// Package config loads and validates oncesync's YAML configuration (docs/guide.md#commands).
//
// Load reads the file, replaces ${VAR} and ${VAR:-default} in scalar values
// from the environment, decodes it strictly (unknown keys are errors), applies
// defaults and validates it. Every problem found is reported at once, each
// naming the file, the line and the field (see Problems). docs/config.md lists
// every key.
//
// A sync's source and destination keys beyond `type` and the few every one
// has are their connector's: the kinds a file may name are passed to Load
// (internal/connector's registry), and each decodes, defaults, checks and
// redacts its own keys (kind.go).
//
// Secrets (API keys, webhook secrets, passwords in URLs and DSNs, API tokens,
// header values) never appear in a Problem, in Sync.Redacted or in
// Sync.DefinitionJSON; Config.SecretValues lists them for output scrubbing.
package config

import (
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/rediskey"
)

// Destination write modes (docs/guide.md#what-a-run-does step 4).
const (
	// ModeSingle writes one record per call, with bounded concurrency.
	ModeSingle = "single"
	// ModeBulk writes one call per page (Brevo: /contacts/import).
	ModeBulk = "bulk"
)

// Defaults of per-sync values that are not deployment settings.
const (
	DefaultStore     = "sqlite://./oncesync.db"
	DefaultWorkspace = "default"
	DefaultListen    = "127.0.0.1:8080"
	DefaultPageSize  = 500
	MinPageSize      = 1
	MaxPageSize      = 10000
	// DefaultMaxRecordBytes bounds one record a source reads (1 MiB); a
	// larger one fails the run with source_query_invalid.
	DefaultMaxRecordBytes = 1 << 20
	MinMaxRecordBytes     = 1 << 10
	MaxMaxRecordBytes     = 1 << 30
	DefaultPartitions     = 1
	MaxPartitions         = 64
	DefaultConcurrency    = 4
	MaxConcurrency        = 256
	DefaultTimeout        = 30 * time.Second
	DefaultSMTPPort       = 587
	MaxBreakerFailures    = 1000
	// MaxInDoubtGrace bounds settings.in_doubt_grace: every read-back of a
	// write in doubt waits that long.
	MaxInDoubtGrace = 10 * time.Minute

	// DefaultSourceTimeout bounds one read of a source (a page, the rows
	// read again by identity): a read waiting on another session's lock,
	// or on a connection whose packets are dropped, fails its run with
	// source_unavailable instead of holding the sync's lease for as long
	// as the lock or the kernel's keepalive lasts.
	DefaultSourceTimeout = 10 * time.Minute
	MinSourceTimeout     = time.Second
	MaxSourceTimeout     = 24 * time.Hour
)

// Config is one oncesync configuration file.
type Config struct {
	// Path is the file the configuration was loaded from.
	Path string
	// Store is the URL of oncesync's store: sqlite://FILE or postgres://...
	Store string
	// Redis is the optional Redis URL (redis:// or rediss://) for leases and
	// the checkpoint barrier when several machines run syncs.
	Redis string
	// RedisNamespace names this deployment's keys in Redis ("" is
	// rediskey.DefaultNamespace), so that deployments sharing one Redis do
	// not share leases, barriers or dead-man markers (RedisKeys).
	RedisNamespace string
	// Settings are the deployment settings.
	Settings Settings
	// Alerts configures the alert sinks (docs/config.md).
	Alerts Alerts
	// Web configures serve's UI and JSON API.
	Web Web
	// AllowEvictingRedis lets oncesync start against a Redis whose
	// maxmemory-policy may evict keys (docs/guide.md#the-checkpoint-barrier). Off by default.
	AllowEvictingRedis bool
	// Syncs are the sync definitions, in file order.
	Syncs []Sync

	// envSecrets are the values of environment variables interpolated into
	// secret fields (see SecretValues).
	envSecrets []string
	// warnLines are the lines of the fields Warnings names.
	warnLines map[string]int
}

// Settings are deployment-wide settings; some have per-sync overrides.
type Settings struct {
	// LeaseTTL is how long a lease lives without renewal (docs/guide.md#the-store-and-the-leases).
	LeaseTTL time.Duration
	// LeaseRenew is how often a run renews its lease; shorter than LeaseTTL.
	LeaseRenew time.Duration
	// DeadmanWindow is how long a workspace or sync may go without a
	// successful run before the dead-man alert fires (docs/guide.md#telling-silence-from-outside).
	DeadmanWindow time.Duration
	// LedgerRetention is how long completed ledger entries are kept (docs/guide.md#the-ledger-and-its-retention).
	LedgerRetention time.Duration
	// BreakerFailures is the number of consecutive failed runs that pauses a
	// sync (docs/guide.md#guardrails).
	BreakerFailures int
	// InDoubtGrace is how long after a write whose outcome is unknown a run
	// waits before reading the destination back
	// (docs/guide.md#the-ledger-and-its-retention).
	InDoubtGrace time.Duration
	// MaxRemovals bounds what one run of a mirror sync may remove
	// (docs/guide.md#write-modes); the zero value means the default, 10 %.
	MaxRemovals Removals
}

// Removals is a bound on a mirror run's removals: a count, or a percentage
// of the sync's records ("10%").
type Removals struct {
	Count   int
	Percent float64
	// Set is false for the zero value (the default applies).
	Set bool
}

// DefaultMaxRemovals is the default bound: 10 % of the sync's records.
var DefaultMaxRemovals = Removals{Percent: 10, Set: true}

// Of is the number of removals allowed for a sync of total records (a
// percentage rounds down, so 10 % of 5 records allows none).
func (r Removals) Of(total int) int {
	if !r.Set {
		r = DefaultMaxRemovals
	}
	if r.Percent > 0 {
		return int(float64(total) * r.Percent / 100)
	}
	return r.Count
}

// String is the bound as written ("10%", "500").
func (r Removals) String() string {
	if !r.Set {
		r = DefaultMaxRemovals
	}
	if r.Percent > 0 {
		return strconv.FormatFloat(r.Percent, 'f', -1, 64) + "%"
	}
	return strconv.Itoa(r.Count)
}

// Defaults returns the default deployment settings:
//
//	key               default  explained in docs/guide.md
//	lease_ttl         30s      "The store and the leases"
//	lease_renew       10s      "The store and the leases"
//	breaker_failures  5        "Guardrails"
//	deadman_window    24h      "Telling silence from outside"
//	ledger_retention  168h     "The ledger and its retention" (7 days)
//	in_doubt_grace    10s      "The ledger and its retention"
func Defaults() Settings {
	return Settings{
		InDoubtGrace:    10 * time.Second,
		LeaseTTL:        30 * time.Second,
		LeaseRenew:      10 * time.Second,
		BreakerFailures: 5,
		DeadmanWindow:   24 * time.Hour,
		LedgerRetention: 168 * time.Hour,
	}
}

// Alerts configures the alert sinks. A sink is enabled when its block is set.
type Alerts struct {
	Webhook WebhookAlert
	Email   EmailAlert
	Sentry  SentryAlert
}

// WebhookAlert sends alerts as signed JSON (Standard Webhooks).
type WebhookAlert struct {
	URL    string
	Secret string
}

// EmailAlert sends alerts by SMTP.
type EmailAlert struct {
	Host     string
	Port     int
	Username string
	Password string
	From     string
	To       []string
	StartTLS bool
}

// SentryAlert sends alerts to Sentry.
type SentryAlert struct {
	DSN string
}

// Web configures serve's UI and /api/v1.
type Web struct {
	// Listen is the address serve listens on (host:port).
	Listen string
	// URL is the address people reach serve's pages at (a proxy's, a
	// load balancer's), which alerts link to; "" derives it from Listen.
	URL string
	// APITokens are the bearer tokens accepted by /api/v1, in file order.
	APITokens []APIToken
	// Users maps a UI sign-in name to its password hash and access.
	Users map[string]User
	// OIDC, when set, offers sign-in with an OpenID Connect provider.
	OIDC *OIDC
	// Secure says serve is reached over HTTPS (a TLS proxy in front): its
	// cookies are Secure (__Host- names) and it sends HSTS.
	Secure bool
	// TLSCert and TLSKey, when set (both), make serve listen with TLS
	// itself (PEM files; relative to the config file); Secure is implied.
	TLSCert, TLSKey string
}

// TLSFiles are the certificate and key files of serve's TLS listener,
// relative paths taken from the config file's directory ("" when serve
// does not listen with TLS).
func (c *Config) TLSFiles() (cert, key string) {
	if c.Web.TLSCert == "" || c.Web.TLSKey == "" {
		return "", ""
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) || c.Path == "" {
			return p
		}
		return filepath.Join(filepath.Dir(c.Path), p)
	}
	return abs(c.Web.TLSCert), abs(c.Web.TLSKey)
}

// HTTPS reports whether serve's pages are reached over HTTPS: behind a TLS
// proxy (Secure) or on serve's own TLS listener.
func (w Web) HTTPS() bool { return w.Secure || w.TLSCert != "" }

// PageBase is the address of serve's pages that alerts link to: URL
// without a trailing slash, else the scheme serve answers with and Listen
// (its default when unset), an unspecified host (0.0.0.0, ::, none) named
// by hostname, the machine's name (or "localhost" when it has none).
func (w Web) PageBase(hostname string) string {
	if w.URL != "" {
		return strings.TrimRight(strings.TrimSpace(w.URL), "/")
	}
	listen := w.Listen
	if listen == "" {
		listen = DefaultListen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = hostname
		if host == "" {
			host = "localhost"
		}
	}
	scheme := "http"
	if w.HTTPS() {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// PageLink returns a function giving the page of a sync, or of a workspace
// (on the overview) when syncID is "", under base; "" when base is.
func PageLink(base string) func(workspace, syncID string) string {
	return func(workspace, syncID string) string {
		switch {
		case base == "":
			return ""
		case syncID != "":
			return base + "/syncs/" + url.PathEscape(syncID)
		case workspace != "":
			return base + "/#workspace-" + url.PathEscape(workspace)
		}
		return base + "/"
	}
}

// Roles a user or API token has (docs/guide.md#running-oncesync-for-several-teams): each can do what
// the one before it can.
const (
	// RoleViewer reads pages and the API.
	RoleViewer = "viewer"
	// RoleOperator also runs now, pauses, resumes, settles, re-queues,
	// previews and tests connections.
	RoleOperator = "operator"
	// RoleAdmin also opens River's UI (the queue of every workspace).
	RoleAdmin = "admin"
)

// Roles lists the roles, weakest first.
var Roles = []string{RoleViewer, RoleOperator, RoleAdmin}

// AllWorkspaces, alone in a Workspaces list, means every workspace (as an
// omitted list does).
const AllWorkspaces = "*"

// Access is a role and the workspaces it applies to (nil: every one).
type Access struct {
	Role       string
	Workspaces []string
}

// User is one web.users entry: a bare hash in the file means admin of
// every workspace.
type User struct {
	// Hash is a bcrypt ("$2a$"/"$2b$"/"$2y$") or argon2id ("$argon2id$")
	// password hash; never a clear-text password.
	Hash string
	Access
}

// APIToken is one web.api_tokens entry: a bare string in the file is an
// admin token of every workspace named "token-N" (N its 1-based position).
type APIToken struct {
	// Name is who the audit log says acted.
	Name string
	// Token is the secret a client sends as "Authorization: Bearer".
	Token string
	Access
}

// OIDC is sign-in with an OpenID Connect provider (authorization-code flow
// with PKCE); the roles claim maps to a role and workspaces
// (docs/guide.md#running-oncesync-for-several-teams).
type OIDC struct {
	// Issuer is the provider's issuer URL (its discovery document is at
	// Issuer + "/.well-known/openid-configuration").
	Issuer       string
	ClientID     string
	ClientSecret string
	// RolesClaim names the ID-token claim (a list of strings, or one
	// string) holding values such as "oncesync:operator:acme".
	RolesClaim string
	// WorkspacesClaim optionally names a claim listing workspaces that
	// apply to the role values without a workspace of their own.
	WorkspacesClaim string
	// RedirectURL is the callback URL registered at the provider; empty:
	// derived from the request (http(s)://HOST/auth/oidc/callback).
	RedirectURL string
	// Scopes requested; empty means openid, profile and groups.
	Scopes []string
}

// Sync is one sync definition.
type Sync struct {
	ID        string
	Workspace string
	// hidden are the config's secret values (set at load), which its
	// stored definition hides wherever they appear (DefinitionJSON).
	hidden []string
	// Schedule is a cron expression (5 fields or a descriptor such as
	// @hourly); empty means the sync only runs on demand.
	Schedule    string
	Source      Source
	Destination Destination
	// Partitions is the number of partition jobs per run (docs/guide.md#the-checkpoint-barrier), 1..64.
	Partitions int
	// AllowRewriteAfterRetention lets a run replay a cursor older than the
	// ledger retention (docs/guide.md#the-ledger-and-its-retention).
	AllowRewriteAfterRetention bool
	// LedgerRetention overrides Settings.LedgerRetention when non-zero.
	LedgerRetention time.Duration
	// DeadmanWindow overrides Settings.DeadmanWindow when non-zero.
	DeadmanWindow time.Duration
	// BreakerFailures overrides Settings.BreakerFailures when non-zero.
	BreakerFailures int
	// MaxRemovals overrides Settings.MaxRemovals when set.
	MaxRemovals Removals
	// HeartbeatURL, when set, is requested after every successful run, and
	// HeartbeatURL + "/fail" after every failed one (docs/guide.md#telling-silence-from-outside: the
	// healthchecks.io / Cronitor convention), so an outside monitor notices
	// silence. It usually holds a token: a secret.
	HeartbeatURL string
}

// Source says what a sync reads: the keys every source has, and Spec, the
// keys its type owns (decoded and checked by the type's SourceKind).
type Source struct {
	// Type selects the kind (csv, jsonl, postgres, ...).
	Type string
	// PageSize is the number of records per page, 1..10000 (default 500).
	PageSize int
	// Identity is the optional primary-key column (docs/guide.md#what-a-run-does).
	Identity string
	// MaxRecordBytes bounds one record, 1 KiB..1 GiB (default 1 MiB): each
	// source refuses a larger one (source.ErrInvalid) without holding it
	// whole where its format allows.
	MaxRecordBytes int
	// Timeout bounds one read of the source (default 10m; 0: no limit).
	Timeout time.Duration
	// Spec is the kind's own keys; nil when the type is not registered.
	Spec SourceSpec
}

// Destination says where a sync writes: the keys every destination has,
// and Spec, the keys its type owns under destination: and mapping:
// (decoded, defaulted and checked by the type's DestinationKind).
type Destination struct {
	// Type selects the kind (brevo, webhook, ...).
	Type string
	// Mode is single or bulk (each kind has its default).
	Mode string
	// Concurrency bounds in-flight calls on the single path (default 4).
	Concurrency int
	// Timeout bounds one destination call (default 30s).
	Timeout time.Duration
	// RateLimit is the maximum requests per second; 0 means unlimited (each
	// kind has its default).
	RateLimit float64
	// WriteMode is upsert (the default), update, create or mirror
	// (docs/guide.md#write-modes); a kind lists the modes it supports
	// (WriteModer).
	WriteMode string
	// Account names the account records go to, in the user's words
	// (docs/guide.md#changing-a-sync): set, a new credential under the same
	// name is the same account (a key rotation sends nothing again); unset,
	// another credential is taken for another account.
	Account string
	// Spec is the kind's own keys; nil when the type is not a registered
	// kind (the file then does not load).
	Spec DestinationSpec
}

// Write modes (destination.write_mode).
const (
	WriteUpsert = "upsert"
	WriteUpdate = "update"
	WriteCreate = "create"
	WriteMirror = "mirror"
)

// EffectiveWriteMode is the destination's write mode, upsert when unset.
func (d Destination) EffectiveWriteMode() string {
	if d.WriteMode == "" {
		return WriteUpsert
	}
	return d.WriteMode
}

// EffectiveMaxRemovals is the sync's bound on a mirror run's removals.
func (s Sync) EffectiveMaxRemovals(set Settings) Removals {
	if s.MaxRemovals.Set {
		return s.MaxRemovals
	}
	if set.MaxRemovals.Set {
		return set.MaxRemovals
	}
	return DefaultMaxRemovals
}

// RedisKeys is the key space of this deployment's leases, barriers and
// dead-man markers in Redis (docs/config.md#top-level). Destination
// accounts' request budgets are not in it: a vendor counts every deployment
// using the same credentials together.
func (c *Config) RedisKeys() rediskey.Space {
	if c.RedisNamespace == "" {
		return rediskey.Default()
	}
	ks, err := rediskey.New(c.RedisNamespace)
	if err != nil {
		// Validation refused it; a Config built in code falls back to the
		// default rather than writing keys under a bad prefix.
		return rediskey.Default()
	}
	return ks
}

// Sync returns the sync with the given id.
func (c *Config) Sync(id string) (*Sync, bool) {
	for i := range c.Syncs {
		if c.Syncs[i].ID == id {
			return &c.Syncs[i], true
		}
	}
	return nil, false
}

// DescribeCursor says where sync syncID's saved cursor is, in words, when
// its source can (CursorDescriber); "" otherwise.
func (c *Config) DescribeCursor(syncID, cursor string) string {
	sc, ok := c.Sync(syncID)
	if !ok {
		return ""
	}
	if d, ok := sc.Source.Spec.(CursorDescriber); ok {
		return d.DescribeCursor(&sc.Source, cursor)
	}
	return ""
}

// EffectiveLedgerRetention is the sync's ledger retention: its override, or
// the deployment setting.
func (s Sync) EffectiveLedgerRetention(set Settings) time.Duration {
	if s.LedgerRetention > 0 {
		return s.LedgerRetention
	}
	return set.LedgerRetention
}

// EffectiveDeadmanWindow is the sync's dead-man window: its override, or the
// deployment setting.
func (s Sync) EffectiveDeadmanWindow(set Settings) time.Duration {
	if s.DeadmanWindow > 0 {
		return s.DeadmanWindow
	}
	return set.DeadmanWindow
}

// EffectiveBreakerFailures is the sync's breaker threshold: its override, or
// the deployment setting.
func (s Sync) EffectiveBreakerFailures(set Settings) int {
	if s.BreakerFailures > 0 {
		return s.BreakerFailures
	}
	return set.BreakerFailures
}
