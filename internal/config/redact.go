package config

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// redactedPassword replaces passwords inside URLs and DSNs.
const redactedPassword = "xxxxx"

// kvPasswordRE finds password=... in a libpq key=value DSN.
var kvPasswordRE = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']\S*)`)

// Redacted returns a copy of s with every secret blanked: the
// destination's (its kind's Redacted: API keys and signing secrets ""),
// passwords inside the source DSN become "xxxxx", and the heartbeat URL
// keeps only its scheme and host ("https://hc-ping.com/xxxxx").
func (s Sync) Redacted() Sync {
	r := s
	if s.Destination.Spec != nil {
		r.Destination.Spec = s.Destination.Spec.Redacted()
	}
	if s.Source.Spec != nil {
		r.Source.Spec = s.Source.Spec.Redacted()
	}
	r.HeartbeatURL = redactHeartbeatURL(s.HeartbeatURL)
	return r
}

// RedactURL hides a URL's password and password- or token-like query
// values ("xxxxx"), for a kind's Redacted.
func RedactURL(raw string) string { return redactURL(raw) }

// URLSecrets are a URL's password and secret-like query values, for a
// kind's Secrets.
func URLSecrets(raw string) []string { return urlSecrets(raw) }

// redactHeartbeatURL keeps only the scheme and host of a heartbeat URL: its
// path is the token (hc-ping.com/UUID, cronitor.link/p/KEY/NAME), and its
// query may hold one too.
func redactHeartbeatURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return redactedPassword
	}
	host := u.Host
	if u.User != nil {
		host = redactedPassword + "@" + host
	}
	return u.Scheme + "://" + host + "/" + redactedPassword
}

// heartbeatSecrets are the parts of a heartbeat URL that may be a token:
// the URL itself, its path and query values, and every path segment long
// enough to be one (short ones such as "p" or "ping" would scrub ordinary
// words).
func heartbeatSecrets(raw string) []string {
	if raw == "" {
		return nil
	}
	out := []string{raw}
	u, err := url.Parse(raw)
	if err != nil {
		return out
	}
	if u.User != nil {
		out = append(out, u.User.String())
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		out = append(out, p)
		for _, seg := range strings.Split(p, "/") {
			if len(seg) >= 8 {
				out = append(out, seg)
			}
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if len(v) >= 8 {
				out = append(out, v)
			}
		}
	}
	return out
}

// redactURL hides the password and any password/token-like query
// parameters of a URL; a string that does not parse is returned unchanged
// unless it looks like it holds credentials, in which case it is blanked.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") || strings.Contains(strings.ToLower(raw), "password") {
			return redactedPassword
		}
		return raw
	}
	changed := false
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redactedPassword)
			changed = true
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if secretParam(k) {
				q.Set(k, redactedPassword)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return raw
	}
	return u.String()
}

// secretParam: a query parameter whose value is a credential. Besides
// the words, the names webhook and function URLs carry keys under (Azure
// SAS's sig, Azure Functions' code, signature and auth parameters). The
// list only grows: the redacted DSN is a source's fingerprint, so a
// parameter redacted once stays so (docs/guide.md#changing-a-sync).
func secretParam(k string) bool {
	k = strings.ToLower(k)
	// Any name with "key" in it: HubSpot's legacy hapikey, access_key,
	// subscription-key, license_key... (hiding a harmless one costs a
	// display, missing a key leaks it).
	for _, part := range []string{"password", "secret", "token", "signature", "credential", "key", "auth", "pass", "sig"} {
		if strings.Contains(k, part) {
			return true
		}
	}
	switch k {
	case "code", "pwd", "hmac":
		return true
	}
	return false
}

// redactDSN hides the password of a postgres:// URL or key=value DSN.
func redactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		return redactURL(dsn)
	}
	return kvPasswordRE.ReplaceAllString(dsn, "${1}"+redactedPassword)
}

// urlSecrets returns the password and secret-like query values of a URL.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if pw, has := u.User.Password(); has {
			out = append(out, pw)
		}
	}
	for k, vs := range u.Query() {
		if secretParam(k) {
			out = append(out, vs...)
		}
	}
	return out
}

func dsnSecrets(dsn string) []string {
	if strings.Contains(dsn, "://") {
		return urlSecrets(dsn)
	}
	var out []string
	for _, m := range kvPasswordRE.FindAllStringSubmatch(dsn, -1) {
		v := m[2]
		if strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'") && len(v) >= 2 {
			v = strings.ReplaceAll(v[1:len(v)-1], `\'`, `'`)
			v = strings.ReplaceAll(v, `\\`, `\`)
		}
		out = append(out, v)
	}
	return out
}

// definition is the canonical JSON shape of a sync. Every field is
// omitempty so that adding an optional key to oncesync later does not change
// the definition of syncs that do not use it.
type definition struct {
	ID                         string          `json:"id"`
	Workspace                  string          `json:"workspace,omitempty"`
	Schedule                   string          `json:"schedule,omitempty"`
	Source                     json.RawMessage `json:"source"`
	Destination                json.RawMessage `json:"destination"`
	Mapping                    json.RawMessage `json:"mapping"`
	Partitions                 int             `json:"partitions,omitempty"`
	AllowRewriteAfterRetention bool            `json:"allow_rewrite_after_retention,omitempty"`
	LedgerRetention            string          `json:"ledger_retention,omitempty"`
	DeadmanWindow              string          `json:"deadman_window,omitempty"`
	BreakerFailures            int             `json:"breaker_failures,omitempty"`
	HeartbeatURL               string          `json:"heartbeat_url,omitempty"` // scheme and host only
}

// nonEmpty drops the fields with a zero value, as omitempty does.
func nonEmpty(fs []Field) []Field {
	var out []Field
	for _, f := range fs {
		switch v := f.Value.(type) {
		case string:
			if v == "" {
				continue
			}
		case int:
			if v == 0 {
				continue
			}
		case float64:
			if v == 0 {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// durString is d in Go syntax, or "" for 0 (unset).
func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// SourceReadJSON is the canonical JSON of what the sync's source reads and
// where its cursor points: the redacted source definition without the keys
// that change neither (page_size, max_record_bytes, cursor_lookback). A
// cursor saved under another one was read from something else
// (docs/guide.md#changing-a-sync).
func (s Sync) SourceReadJSON() (string, error) {
	r := s.Redacted()
	fields := nonEmpty([]Field{{"type", r.Source.Type}, {"identity", r.Source.Identity}})
	if r.Source.Spec != nil {
		fields = r.Source.Spec.Definition(fields)
	}
	kept := fields[:0]
	for _, f := range fields {
		switch f.Key {
		case "page_size", "max_record_bytes", "cursor_lookback":
		default:
			kept = append(kept, f)
		}
	}
	b, err := definitionObject(kept)
	return string(b), err
}

// DefinitionJSON returns the canonical JSON of the redacted sync: keys in a
// fixed order (map keys sorted), durations in Go syntax, no secrets (header
// names are kept, their values are not). Equal definitions give equal bytes
// on every run and machine, so it detects definition changes (docs/guide.md#what-a-run-does).
func (s Sync) DefinitionJSON() (string, error) {
	r := s.Redacted()
	d := r.Destination
	// write_mode joins the definition only when it is not the default, so
	// the definitions stored before it existed are unchanged.
	wm := d.WriteMode
	if wm == WriteUpsert {
		wm = ""
	}
	common := nonEmpty([]Field{{"type", d.Type}, {"mode", d.Mode}, {"concurrency", d.Concurrency}, {"timeout", durString(d.Timeout)}, {"rate_limit", d.RateLimit}, {"write_mode", wm}, {"account", d.Account}})
	destFields, mapFields := common, []Field(nil)
	if d.Spec != nil {
		destFields, mapFields = d.Spec.Definition(common)
	}
	srcFields := nonEmpty([]Field{{"type", r.Source.Type}, {"page_size", r.Source.PageSize}, {"identity", r.Source.Identity}})
	if m := r.Source.MaxRecordBytes; m != 0 && m != DefaultMaxRecordBytes {
		// Only when set otherwise: the definitions stored before the key
		// existed stay equal.
		srcFields = append(srcFields, Field{"max_record_bytes", m})
	}
	if t := r.Source.Timeout; t != 0 && t != DefaultSourceTimeout {
		srcFields = append(srcFields, Field{"timeout", durString(t)})
	}
	if r.Source.Spec != nil {
		srcFields = r.Source.Spec.Definition(srcFields)
	}
	src, err := definitionObject(srcFields)
	if err != nil {
		return "", err
	}
	dest, err := definitionObject(destFields)
	if err != nil {
		return "", err
	}
	mapping, err := definitionObject(mapFields)
	if err != nil {
		return "", err
	}
	def := definition{
		ID:                         r.ID,
		Workspace:                  r.Workspace,
		Schedule:                   r.Schedule,
		Source:                     src,
		Destination:                dest,
		Mapping:                    mapping,
		Partitions:                 r.Partitions,
		AllowRewriteAfterRetention: r.AllowRewriteAfterRetention,
		LedgerRetention:            durString(r.LedgerRetention),
		DeadmanWindow:              durString(r.DeadmanWindow),
		BreakerFailures:            r.BreakerFailures,
		HeartbeatURL:               r.HeartbeatURL,
	}
	b, err := json.Marshal(def)
	if err != nil {
		return "", err
	}
	return hideIn(string(b), s.hidden), nil
}

// hideIn replaces in a definition's JSON every secret value of eight or
// more bytes that is left in it, as JSON writes it, with "xxxxx": a secret
// key's own value is redacted already, but the same value elsewhere (a
// MySQL password also in its socket's path) was stored in clear (an
// independent check, 2026-12-06). Shorter values could be ordinary words or
// numbers of the definition.
func hideIn(def string, secrets []string) string {
	for _, v := range secrets {
		if len(v) < 8 {
			continue
		}
		q, err := json.Marshal(v)
		if err != nil {
			continue
		}
		def = strings.ReplaceAll(def, string(q[1:len(q)-1]), "xxxxx")
	}
	return def
}

// SecretValues returns every secret value the configuration holds (API
// keys, webhook secrets, header values, API tokens, SMTP password, Sentry DSN,
// passwords in the store, Redis, DSN and destination URLs), deduplicated and
// sorted, so output can be scrubbed of them. It includes the value of every
// environment variable interpolated into one of those fields.
func (c *Config) SecretValues() []string {
	var out []string
	add := func(vs ...string) {
		for _, v := range vs {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	add(c.envSecrets...)
	add(dsnSecrets(c.Store)...)
	add(urlSecrets(c.Redis)...)
	add(c.Alerts.Webhook.Secret, c.Alerts.Email.Password, c.Alerts.Sentry.DSN)
	if u, err := url.Parse(c.Alerts.Sentry.DSN); err == nil && u.User != nil {
		add(u.User.Username())
	}
	add(urlSecrets(c.Alerts.Webhook.URL)...)
	for _, t := range c.Web.APITokens {
		add(t.Token)
	}
	for _, u := range c.Web.Users {
		add(u.Hash)
	}
	if c.Web.OIDC != nil {
		add(c.Web.OIDC.ClientSecret)
	}
	// A heartbeat URL's path segments may be tokens, or the job's name
	// (Cronitor's and others' URLs end in it): a segment that is a sync's
	// id or a workspace's name is the config's own label, shown everywhere,
	// not a secret (it hid the silent sync's name in the dead-man's alert).
	names := map[string]bool{}
	for _, s := range c.Syncs {
		names[s.ID], names[s.Workspace] = true, true
	}
	for _, s := range c.Syncs {
		if s.Destination.Spec != nil {
			add(s.Destination.Spec.Secrets()...)
		}
		if s.Source.Spec != nil {
			add(s.Source.Spec.Secrets()...)
		}
		for _, v := range heartbeatSecrets(s.HeartbeatURL) {
			if !names[v] {
				add(v)
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
