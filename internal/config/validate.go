package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/rediskey"
)

var (
	idRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]{0,15}$`)
	modes    = []string{ModeSingle, ModeBulk}
)

// IsName reports whether s is a valid sync id or workspace name: letters,
// digits, '.', '_' or '-', starting with a letter or digit, at most 64.
func IsName(s string) bool { return idRE.MatchString(s) }

// applyDefaults fills every field that was not written in the file.
func (l *loader) applyDefaults(c *Config) {
	def := Defaults()
	if !l.has("store") {
		c.Store = DefaultStore
	}
	s := &c.Settings
	if !l.has("settings.lease_ttl") {
		s.LeaseTTL = def.LeaseTTL
	}
	if !l.has("settings.lease_renew") {
		s.LeaseRenew = def.LeaseRenew
	}
	if !l.has("settings.breaker_failures") {
		s.BreakerFailures = def.BreakerFailures
	}
	if !l.has("settings.deadman_window") {
		s.DeadmanWindow = def.DeadmanWindow
	}
	if !l.has("settings.ledger_retention") {
		s.LedgerRetention = def.LedgerRetention
	}
	if !l.has("settings.in_doubt_grace") {
		s.InDoubtGrace = def.InDoubtGrace
	}
	if !l.has("web.listen") {
		c.Web.Listen = DefaultListen
	}
	if l.has("alerts.email") {
		if !l.has("alerts.email.port") {
			c.Alerts.Email.Port = DefaultSMTPPort
		}
		if !l.has("alerts.email.starttls") {
			c.Alerts.Email.StartTLS = true
		}
	}
	for i := range c.Syncs {
		p := fmt.Sprintf("syncs[%d]", i)
		sy := &c.Syncs[i]
		if !l.has(p + ".workspace") {
			sy.Workspace = DefaultWorkspace
		}
		if !l.has(p + ".partitions") {
			sy.Partitions = DefaultPartitions
		}
		if !l.has(p + ".source.page_size") {
			sy.Source.PageSize = DefaultPageSize
		}
		if !l.has(p + ".source.max_record_bytes") {
			sy.Source.MaxRecordBytes = DefaultMaxRecordBytes
		}
		if !l.has(p + ".source.timeout") {
			sy.Source.Timeout = DefaultSourceTimeout
		}
		d := &sy.Destination
		dp := p + ".destination"
		if !l.has(dp + ".concurrency") {
			d.Concurrency = DefaultConcurrency
		}
		if !l.has(dp + ".timeout") {
			d.Timeout = DefaultTimeout
		}
		if d.Spec != nil {
			d.Spec.Defaults(d, &Checker{l: l, sync: p})
		}
	}
}

// check reports msg at path unless the field already has a problem.
func (l *loader) check(path, msg string) {
	if !l.bad[path] {
		l.report(path, msg)
	}
}

func (l *loader) validate(c *Config) {
	if l.has("store") && !l.bad["store"] {
		if msg := checkStoreURL(c.Store); msg != "" {
			l.check("store", msg+l.emptyHint("store"))
		} else if l.preflight {
			if msg := checkStoreTLSFiles(c.Store); msg != "" {
				l.check("store", msg)
			}
		}
	}
	if c.Redis != "" {
		if msg := checkURL(c.Redis, "redis", "rediss"); msg != "" {
			l.check("redis", msg)
		}
	}
	if l.has("redis_namespace") && !l.bad["redis_namespace"] {
		if _, err := rediskey.New(c.RedisNamespace); err != nil {
			l.check("redis_namespace", "must be 1 to 64 letters, digits, '.', '_' or '-', got "+l.show("redis_namespace", c.RedisNamespace))
		}
	}
	l.validateSettings(&c.Settings)
	l.validateAlerts(&c.Alerts)
	l.validateWeb(&c.Web)
	if len(c.Syncs) == 0 && !l.bad["syncs"] {
		l.check("syncs", "at least one sync is required")
	}
	firstID := map[string]int{}
	for i := range c.Syncs {
		p := fmt.Sprintf("syncs[%d]", i)
		if l.bad[p] {
			continue
		}
		s := &c.Syncs[i]
		if s.ID != "" && idRE.MatchString(s.ID) {
			if j, dup := firstID[s.ID]; dup {
				line, _ := l.lineOf(fmt.Sprintf("syncs[%d].id", j))
				l.check(p+".id", fmt.Sprintf("duplicate sync id %q (already used by syncs[%d] at line %d)", s.ID, j, line))
			} else {
				firstID[s.ID] = i
			}
		}
		l.validateSync(p, s)
		l.validatePartitions(p, s, c.Redis != "")
	}
}

// validatePartitions checks what a partitioned sync (docs/guide.md#the-checkpoint-barrier) needs: an
// identity column to split the rows by, and Redis for the checkpoint barrier
// its partitions check before they write.
func (l *loader) validatePartitions(p string, s *Sync, haveRedis bool) {
	if s.Partitions <= 1 || l.bad[p+".partitions"] {
		return
	}
	if strings.TrimSpace(s.Source.Identity) == "" && !l.bad[p+".source"] {
		l.check(p+".partitions", fmt.Sprintf("partitions: %d needs source.identity: rows are split between the partitions by a stable hash of the identity column", s.Partitions))
		return
	}
	if !haveRedis {
		l.check(p+".partitions", fmt.Sprintf("partitions: %d needs redis: the partitions check the run's source snapshot in a checkpoint barrier kept in Redis", s.Partitions))
	}
}

func (l *loader) positive(path string, d time.Duration) {
	if l.has(path) && d <= 0 {
		l.check(path, "must be positive, got "+d.String())
	}
}

func (l *loader) validateSettings(s *Settings) {
	l.positive("settings.lease_ttl", s.LeaseTTL)
	l.positive("settings.lease_renew", s.LeaseRenew)
	l.positive("settings.deadman_window", s.DeadmanWindow)
	l.positive("settings.ledger_retention", s.LedgerRetention)
	if s.LeaseTTL > 0 && s.LeaseRenew > 0 && s.LeaseRenew >= s.LeaseTTL {
		at := "settings.lease_renew"
		if !l.has(at) {
			at = "settings.lease_ttl"
		}
		l.check(at, fmt.Sprintf("lease_renew (%s) must be shorter than lease_ttl (%s)", s.LeaseRenew, s.LeaseTTL))
	}
	l.intRange("settings.breaker_failures", s.BreakerFailures, 1, MaxBreakerFailures)
	if l.has("settings.in_doubt_grace") && (s.InDoubtGrace < 0 || s.InDoubtGrace > MaxInDoubtGrace) {
		l.check("settings.in_doubt_grace", fmt.Sprintf("must be between 0s and %s, got %s", MaxInDoubtGrace, s.InDoubtGrace))
	}
}

// intRange checks a written integer field.
func (l *loader) intRange(path string, v, lo, hi int) {
	if l.has(path) && (v < lo || v > hi) {
		l.check(path, fmt.Sprintf("must be between %d and %d, got %d", lo, hi, v))
	}
}

// passwordHash reports whether h is written as a bcrypt hash or an argon2id
// PHC string (the web UI reads its parameters when it starts).
func passwordHash(h string) bool {
	for _, prefix := range []string{"$2a$", "$2b$", "$2y$", "$argon2id$"} {
		if strings.HasPrefix(h, prefix) {
			return true
		}
	}
	return false
}

func (l *loader) required(path, value, msg string) bool {
	if strings.TrimSpace(value) != "" {
		return true
	}
	if msg == "" {
		msg = "is required"
	}
	l.check(path, msg+l.emptyHint(path))
	return false
}

func (l *loader) validateAlerts(a *Alerts) {
	if l.has("alerts.webhook") {
		if l.required("alerts.webhook.url", a.Webhook.URL, "") {
			if msg := checkURL(a.Webhook.URL, "http", "https"); msg != "" {
				l.check("alerts.webhook.url", msg)
			}
		}
		if _, ok := apiclient.SigningKey(a.Webhook.Secret); !ok {
			// Signed with the text itself, no Standard Webhooks library
			// would verify an alert (the webhook destination refuses it too).
			l.check("alerts.webhook.secret", "has Standard Webhooks' whsec_ prefix but what follows is not base64 (whsec_BASE64): copy the secret as the receiver gives it")
		}
	}
	if l.has("alerts.email") {
		e := &a.Email
		l.required("alerts.email.host", e.Host, "")
		l.intRange("alerts.email.port", e.Port, 1, 65535)
		if l.required("alerts.email.from", e.From, "") {
			if _, err := mail.ParseAddress(e.From); err != nil {
				l.check("alerts.email.from", "is not a valid e-mail address")
			}
		}
		if len(e.To) == 0 {
			l.check("alerts.email.to", "needs at least one address")
		}
		for i, to := range e.To {
			p := fmt.Sprintf("alerts.email.to[%d]", i)
			// Addresses are personal data: never echo them.
			if _, err := mail.ParseAddress(to); err != nil && !l.bad[p] {
				l.check(p, "is not a valid e-mail address")
			}
		}
	}
	if l.has("alerts.sentry") {
		if l.required("alerts.sentry.dsn", a.Sentry.DSN, "") {
			u, err := url.Parse(a.Sentry.DSN)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User == nil || u.User.Username() == "" || strings.Trim(u.Path, "/") == "" {
				l.check("alerts.sentry.dsn", "is not a valid Sentry DSN (expected https://KEY@HOST/PROJECT)")
			}
		}
	}
}

func (l *loader) validateWeb(w *Web) {
	if l.has("web.listen") && l.required("web.listen", w.Listen, "") {
		_, port, err := net.SplitHostPort(w.Listen)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 0 || n > 65535 {
			l.check("web.listen", "must be HOST:PORT (e.g. 127.0.0.1:8080), got "+l.show("web.listen", w.Listen))
		}
	}
	if l.has("web.url") && l.required("web.url", w.URL, "") {
		if msg := checkURL(w.URL, "http", "https"); msg != "" {
			l.check("web.url", msg)
		} else if u, _ := url.Parse(strings.TrimSpace(w.URL)); u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			l.check("web.url", "must be the address of serve's pages alone, without user, query or fragment (e.g. https://oncesync.example.com)")
		}
	}
	if (w.TLSCert == "") != (w.TLSKey == "") {
		at := "web.tls_key"
		if w.TLSCert == "" {
			at = "web.tls_cert"
		}
		l.check(at, "tls_cert and tls_key go together: the certificate chain and its private key (PEM files)")
	}
	mapped := map[string]bool{}
	for _, e := range l.entries {
		mapped[e] = true
	}
	names := map[string]string{} // principal name -> the field that named it
	for _, name := range slices.Sorted(maps.Keys(w.Users)) {
		u := w.Users[name]
		p := join("web.users", name)
		if strings.HasPrefix(name, "oidc:") {
			l.check(p, "names starting with oidc: are single sign-on's (web.oidc); choose another name")
		}
		hp := p
		if mapped[p] {
			hp = p + ".hash"
		}
		if l.required(hp, u.Hash, "is required: the user's bcrypt or argon2id password hash (e.g. from `htpasswd -nbBC 12 NAME PASSWORD`)") &&
			!passwordHash(u.Hash) {
			l.check(hp, "must be a bcrypt or argon2id password hash (e.g. from `htpasswd -nbBC 12 NAME PASSWORD`), not a clear-text password")
		}
		l.validateAccess(p, &u.Access, mapped[p])
		w.Users[name] = u
		names[name] = p
	}
	tokens := map[string]string{}
	for i := range w.APITokens {
		t := &w.APITokens[i]
		p := fmt.Sprintf("web.api_tokens[%d]", i)
		tp := p
		if mapped[p] {
			tp = p + ".token"
			if l.required(p+".name", t.Name, "is required (the audit log names the token by it)") {
				switch first, dup := names[t.Name]; {
				case dup:
					l.check(p+".name", fmt.Sprintf("%q is already the name of %s; every user and token needs a name of its own", clip(t.Name), first))
				case !idRE.MatchString(t.Name):
					l.check(p+".name", "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got "+l.show(p+".name", t.Name))
				default:
					names[t.Name] = p + ".name"
				}
			}
		} else if first, dup := names[t.Name]; dup {
			l.check(p, fmt.Sprintf("this unnamed token is called %q, already the name of %s; give the tokens names ({name, token, role})", t.Name, first))
		} else {
			names[t.Name] = p
		}
		if l.required(tp, t.Token, "is empty") {
			if first, dup := tokens[t.Token]; dup {
				l.check(tp, "is the same token as "+first+"; every token must be different")
			}
			tokens[t.Token] = tp
		}
		l.validateAccess(p, &t.Access, mapped[p])
	}
	if o := w.OIDC; o != nil {
		if l.required("web.oidc.issuer", o.Issuer, "") {
			if msg := checkURL(o.Issuer, "http", "https"); msg != "" {
				l.check("web.oidc.issuer", msg)
			}
		}
		l.required("web.oidc.client_id", o.ClientID, "")
		l.required("web.oidc.client_secret", o.ClientSecret, "")
		l.required("web.oidc.roles_claim", o.RolesClaim, "is required: the claim whose values (e.g. \"oncesync:operator:acme\") give the role")
		if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
			l.check("web.oidc.scopes", "must include openid (the ID token carries the roles claim)")
		}
		if o.RedirectURL != "" {
			if msg := checkURL(o.RedirectURL, "http", "https"); msg != "" {
				l.check("web.oidc.redirect_url", msg)
			}
		}
	}
}

// validateAccess checks a user's or token's role and workspaces, and
// normalises them: ["*"] becomes nil (every workspace).
func (l *loader) validateAccess(p string, a *Access, mapped bool) {
	if mapped {
		if l.required(p+".role", a.Role, "is required: viewer, operator or admin") && !slices.Contains(Roles, a.Role) {
			l.check(p+".role", "unknown role "+l.show(p+".role", a.Role)+": must be viewer, operator or admin")
		}
	}
	wp := p + ".workspaces"
	if l.listed[wp] && len(a.Workspaces) == 0 {
		l.check(wp, "is empty; omit it (or write [\"*\"]) for every workspace")
	}
	for i, ws := range a.Workspaces {
		ip := fmt.Sprintf("%s[%d]", wp, i)
		switch {
		case ws == AllWorkspaces && len(a.Workspaces) > 1:
			l.check(ip, "\"*\" means every workspace: write it alone")
		case ws != AllWorkspaces && !idRE.MatchString(ws):
			l.check(ip, "must be a workspace name (letters, digits, '.', '_' or '-') or \"*\", got "+l.show(ip, ws))
		}
	}
	if len(a.Workspaces) == 1 && a.Workspaces[0] == AllWorkspaces {
		a.Workspaces = nil
	}
}

func (l *loader) validateSync(p string, s *Sync) {
	if l.required(p+".id", s.ID, "") && !idRE.MatchString(s.ID) {
		l.check(p+".id", "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got "+l.show(p+".id", s.ID))
	}
	if l.required(p+".workspace", s.Workspace, "") && !idRE.MatchString(s.Workspace) {
		l.check(p+".workspace", "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got "+l.show(p+".workspace", s.Workspace))
	}
	if strings.TrimSpace(s.Schedule) != "" {
		if _, err := ParseSchedule(s.Schedule); err != nil {
			msg := "is not a valid cron expression (5 fields like \"*/15 * * * *\" or a descriptor like @hourly)"
			if !l.fromEnv(p + ".schedule") { // safe to echo
				msg = fmt.Sprintf("invalid cron expression %q: %s (use 5 fields like \"*/15 * * * *\" or a descriptor like @hourly)", clip(s.Schedule), err)
			}
			l.check(p+".schedule", msg)
		}
	}
	l.intRange(p+".partitions", s.Partitions, 1, MaxPartitions)
	l.positive(p+".ledger_retention", s.LedgerRetention)
	l.positive(p+".deadman_window", s.DeadmanWindow)
	l.intRange(p+".breaker_failures", s.BreakerFailures, 1, MaxBreakerFailures)
	if l.has(p + ".heartbeat_url") {
		// checkURL never echoes the URL: its path usually is the token.
		if msg := checkURL(s.HeartbeatURL, "http", "https"); msg != "" {
			l.check(p+".heartbeat_url", msg)
		}
	}
	l.validateSource(p, &s.Source)
	l.validateDestination(p, s)
}

// notFor reports every written field of fields at base, which type does not
// use; hint says what does.
func (l *loader) notFor(base, kind, typ string, fields []string, hint string) {
	for _, f := range fields {
		if l.has(base + "." + f) {
			l.check(base+"."+f, fmt.Sprintf("is not used by %s %s (%s)", typ, kind, hint))
		}
	}
}

func (l *loader) validateSource(sp string, s *Source) {
	p := sp + ".source"
	types := typesOf(l.kinds.Sources)
	if !l.has(p) {
		l.check(p, "is required (a mapping with type: "+orList(types)+")")
		return
	}
	if l.bad[p] {
		return
	}
	if !l.required(p+".type", s.Type, "is required (one of "+strings.Join(types, ", ")+")") || l.bad[p+".type"] {
		return
	}
	l.intRange(p+".page_size", s.PageSize, MinPageSize, MaxPageSize)
	l.intRange(p+".max_record_bytes", s.MaxRecordBytes, MinMaxRecordBytes, MaxMaxRecordBytes)
	if l.has(p+".timeout") && s.Timeout != 0 && (s.Timeout < MinSourceTimeout || s.Timeout > MaxSourceTimeout) {
		l.check(p+".timeout", fmt.Sprintf("must be 0s (no limit) or between %s and %s, got %s", MinSourceTimeout, MaxSourceTimeout, s.Timeout))
	}
	k := byType(l.kinds.Sources, s.Type)
	if k == nil || s.Spec == nil {
		l.check(p+".type", fmt.Sprintf("unknown source type %s (valid: %s)", l.show(p+".type", s.Type), strings.Join(types, ", ")))
		return
	}
	s.Spec.Check(s, &Checker{l: l, sync: sp})
	if pf, ok := s.Spec.(Preflighter); ok && l.preflight {
		pf.Preflight(&Checker{l: l, sync: sp})
	}
	for _, other := range l.kinds.Sources {
		for _, key := range other.SourceKeys() {
			if !slices.Contains(k.SourceKeys(), key) {
				l.notFor(p, "sources", s.Type, []string{key}, andList(owners(l.kinds.Sources, SourceKind.SourceKeys, key))+" only")
			}
		}
	}
}

func (l *loader) validateDestination(sp string, s *Sync) {
	p := sp + ".destination"
	d := &s.Destination
	types := typesOf(l.kinds.Destinations)
	if !l.has(p) {
		l.check(p, "is required (a mapping with type: "+orList(types)+")")
		return
	}
	if l.bad[p] {
		return
	}
	if !l.required(p+".type", d.Type, "is required (one of "+strings.Join(types, ", ")+")") || l.bad[p+".type"] {
		return
	}
	if l.has(p+".mode") && d.Mode != ModeSingle && d.Mode != ModeBulk {
		l.check(p+".mode", fmt.Sprintf("unknown mode %s (valid: %s)", l.show(p+".mode", d.Mode), strings.Join(modes, ", ")))
	}
	l.intRange(p+".concurrency", d.Concurrency, 1, MaxConcurrency)
	l.positive(p+".timeout", d.Timeout)
	if l.has(p+".rate_limit") && d.RateLimit < 0 {
		l.check(p+".rate_limit", fmt.Sprintf("must be 0 (unlimited) or more requests per second, got %g", d.RateLimit))
	}
	k := byType(l.kinds.Destinations, d.Type)
	if k == nil || d.Spec == nil {
		l.check(p+".type", fmt.Sprintf("unknown destination type %s (valid: %s)", l.show(p+".type", d.Type), strings.Join(types, ", ")))
		return
	}
	l.validateWriteMode(sp, s, k)
	if p := sp + ".destination.account"; l.has(p) {
		if a := s.Destination.Account; a == "" || len(a) > 128 || strings.ContainsFunc(a, unicode.IsControl) {
			l.check(p, "want the account's name, 1 to 128 characters (it is not a secret: never put a key here)")
		}
	}
	// The keys of other kinds, in their registration order.
	mp := sp + ".mapping"
	for _, other := range l.kinds.Destinations {
		if other.Type() == d.Type {
			continue
		}
		for _, key := range other.DestinationKeys() {
			if !slices.Contains(k.DestinationKeys(), key) && !l.bad[p+"."+key] {
				l.notFor(p, "destinations", d.Type, []string{key}, andList(owners(l.kinds.Destinations, DestinationKind.DestinationKeys, key))+" only")
			}
		}
		for _, key := range other.MappingKeys() {
			if !slices.Contains(k.MappingKeys(), key) {
				l.notFor(mp, "destinations", d.Type, []string{key},
					andList(owners(l.kinds.Destinations, DestinationKind.MappingKeys, key))+" only; "+d.Type+" uses "+andList(k.MappingKeys()))
			}
		}
	}
	d.Spec.Check(d, &Checker{l: l, sync: sp})
	if pf, ok := d.Spec.(Preflighter); ok && l.preflight {
		pf.Preflight(&Checker{l: l, sync: sp})
	}
}

// orList is "a or b" ("a, b or c").
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// checkURL returns a problem with an absolute URL of one of schemes, or "".
// It never echoes the URL (it may carry a password).
func checkURL(raw string, schemes ...string) string {
	want := make([]string, len(schemes))
	for i, s := range schemes {
		want[i] = s + "://"
	}
	wantMsg := "must be a URL starting with " + strings.Join(want, " or ")
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" {
		return wantMsg
	}
	ok := false
	for _, s := range schemes {
		if strings.EqualFold(u.Scheme, s) {
			ok = true
		}
	}
	if !ok {
		if schemeRE.MatchString(u.Scheme) {
			return fmt.Sprintf("%s, got %s://", wantMsg, u.Scheme)
		}
		return wantMsg
	}
	if u.Host == "" {
		return wantMsg + " with a host"
	}
	return ""
}

// checkStoreURL validates the store URL without echoing it.
func checkStoreURL(raw string) string {
	const want = "must be a sqlite:// or postgres:// URL (e.g. sqlite://./oncesync.db)"
	scheme, rest, found := strings.Cut(strings.TrimSpace(raw), "://")
	if !found {
		return want
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		if strings.TrimSpace(rest) == "" {
			return "must name a database file after sqlite:// (e.g. sqlite://./oncesync.db)"
		}
		return ""
	case "postgres", "postgresql":
		if msg := checkURL(raw, "postgres", "postgresql"); msg != "" {
			return msg
		}
		return checkStoreSchema(raw)
	}
	if schemeRE.MatchString(scheme) {
		return fmt.Sprintf("%s, got %s://", want, scheme)
	}
	return want
}

// storeSchemaRE is the rule the PostgreSQL store applies to the schema its
// tables live in (store/postgres, Open): checked here so that validate
// finds what every command would refuse.
var storeSchemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// checkStoreSchema checks the schema a postgres store URL names with its
// search_path parameter (the first entry of the list).
func checkStoreSchema(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return ""
	}
	// oncesync sets search_path itself after connecting (to the schema of
	// ?search_path=, else oncesync), which overrides one in options: two
	// deployments told apart only by options' search_path shared one schema,
	// their syncs, leases and ledger (docs/config.md#top-level).
	if opts := strings.ToLower(u.Query().Get("options")); strings.Contains(opts, "search_path") {
		return "options sets search_path, which oncesync does not use: its tables are in the schema of ?search_path=NAME (oncesync when absent); " +
			"remove search_path from options, and name the schema with ?search_path=NAME (an existing deployment's tables are in oncesync, or in the ?search_path= schema)"
	}
	sp := u.Query().Get("search_path")
	if sp == "" {
		return ""
	}
	first, _, _ := strings.Cut(sp, ",")
	schema := strings.Trim(strings.TrimSpace(first), `"`)
	if !storeSchemaRE.MatchString(schema) || strings.HasPrefix(schema, "pg_") {
		return fmt.Sprintf("search_path names schema %q for oncesync's tables: want a lower-case identifier of at most 63 characters (letters, digits, _), not pg_*", schema)
	}
	return ""
}

// checkStoreTLSFiles reports a TLS file a postgres store URL names
// (sslrootcert, sslcert, sslkey) that this machine cannot read: every
// command would fail to open the store on it, and validate said "valid"
// (the preflight, as a file source's path: on this machine, connecting
// nowhere). The path is the file's, never the URL's other parts.
func checkStoreTLSFiles(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return ""
	}
	for _, param := range []string{"sslrootcert", "sslcert", "sslkey"} {
		path := u.Query().Get(param)
		if path == "" || (param == "sslrootcert" && path == "system") {
			continue
		}
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("%s %s does not exist on this machine (every command would fail to open the store): correct the path, relative to the directory oncesync runs in", param, path)
		case err != nil:
			return fmt.Sprintf("%s %s cannot be read: %v", param, path, errors.Unwrap(err))
		case fi.IsDir():
			return fmt.Sprintf("%s %s is a directory, not a PEM file", param, path)
		}
	}
	return ""
}

// validateWriteMode checks destination.write_mode against what the kind
// supports; mirror needs an identity (a removed row is known by it) and a
// source read whole on every run.
func (l *loader) validateWriteMode(sp string, s *Sync, k DestinationKind) {
	p := sp + ".destination.write_mode"
	if !l.has(p) {
		return
	}
	all := []string{WriteUpsert, WriteUpdate, WriteCreate, WriteMirror}
	wm := s.Destination.WriteMode
	if !slices.Contains(all, wm) {
		l.check(p, fmt.Sprintf("unknown write mode %s (valid: %s)", l.show(p, wm), strings.Join(all, ", ")))
		return
	}
	if supported := writeModesOf(k); !slices.Contains(supported, wm) {
		l.check(p, fmt.Sprintf("%s destinations do not support write_mode %s (supported: %s)", k.Type(), wm, strings.Join(supported, ", ")))
		return
	}
	if wm == WriteMirror && s.Source.Identity == "" {
		l.check(p, "mirror needs the source's identity column (source.identity), by which a removed row is known")
	}
	if wm == WriteMirror && s.Partitions > 1 {
		l.check(p, "mirror cannot be used with partitions: each partition reads only its slice, so no run sees which rows are gone")
	}
}
