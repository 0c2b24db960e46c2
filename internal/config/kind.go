package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// A DestinationKind is one destination type's part of the configuration:
// the keys it owns under a sync's `destination:` and `mapping:`, their
// defaults, checks and secrets. A connector package implements it and
// internal/connector registers it; config itself knows only `type` and the
// keys every destination has (mode, concurrency, timeout, rate_limit).
type DestinationKind interface {
	// Type is the value of destination.type that selects the kind.
	Type() string
	// NewSpec returns an empty spec for one sync to decode into.
	NewSpec() DestinationSpec
	// DestinationKeys and MappingKeys name the keys the kind owns, in the
	// order its messages list them.
	DestinationKeys() []string
	MappingKeys() []string
	// SecretKeys are the keys under destination: whose values are secret
	// (a variable interpolated into one is scrubbed from output too).
	SecretKeys() []string
}

// WriteModer is implemented by a DestinationKind that supports write
// modes beyond upsert (destination.write_mode): it lists them all,
// upsert included. A kind without it supports upsert only.
type WriteModer interface {
	WriteModes() []string
}

// writeModesOf are the write modes kind k supports.
func writeModesOf(k DestinationKind) []string {
	if m, ok := k.(WriteModer); ok {
		return m.WriteModes()
	}
	return []string{WriteUpsert}
}

// PayloadSettings is implemented by a DestinationSpec with keys that shape
// every record at the destination beyond its mapped values (the lists
// contacts are added to): PayloadSettings returns them in a canonical form,
// "" when none is set or none applies. A change of it sends every record
// again (docs/guide.md#changing-a-sync).
// d is the destination the spec belongs to (its mode and write mode say
// whether the settings apply).
type PayloadSettings interface {
	PayloadSettings(d *Destination) string
}

// DestinationPayload is d's PayloadSettings, "" when its kind has none.
func DestinationPayload(d Destination) string {
	if ps, ok := d.Spec.(PayloadSettings); ok {
		return ps.PayloadSettings(&d)
	}
	return ""
}

// Addresser is implemented by a DestinationSpec whose records go to an
// account named by more than its type: Address returns the endpoint
// (base_url, url) and the credential that picks the account (an API key, a
// token; "" when none does).
type Addresser interface {
	Address() (endpoint, credential string)
}

// DestinationAddress says where d's records go, to tell another account
// from the one a sync delivered to: the type and a digest of the endpoint
// and the credential (neither in clear: a webhook's URL may hold a token).
// A change of it sends every record again (docs/guide.md#changing-a-sync):
// the ledger's record of what was delivered is the old account's.
func DestinationAddress(d Destination) string {
	a, ok := d.Spec.(Addresser)
	if !ok {
		return d.Type
	}
	endpoint, credential := a.Address()
	sum := sha256.Sum256([]byte("oncesync destination\x00" + strings.TrimRight(endpoint, "/") + "\x00" + credential))
	return d.Type + " " + hex.EncodeToString(sum[:8])
}

// DestinationSpec is one sync's decoded kind-owned keys.
type DestinationSpec interface {
	// Decode decodes the value of the kind's key under destination: (mapping
	// false) or mapping: (mapping true).
	Decode(key string, mapping bool, v Value)
	// Defaults fills what the file left unset, including d's Mode.
	Defaults(d *Destination, c *Checker)
	// Check reports the kind's problems.
	Check(d *Destination, c *Checker)
	// Secrets are the secret values it holds (API keys, signing secrets,
	// header values, passwords in its URLs).
	Secrets() []string
	// Redacted is a copy with every secret blanked.
	Redacted() DestinationSpec
	// Definition returns the canonical definition's destination and
	// mapping objects, as ordered fields without empty values; common are
	// the destination's own (type, mode, concurrency, timeout, rate_limit,
	// write_mode),
	// in that order, for the kind to place among its keys.
	Definition(common []Field) (destination, mapping []Field)
}

// Field is one key of a definition object.
type Field struct {
	Key   string
	Value any
}

// InOrder is fields sorted by the place of their keys in order (a kind's
// Definition mixes its keys in among the common ones, as the definitions
// already stored have them); keys not in order come last, as given.
func InOrder(order []string, fields []Field) []Field {
	out := slices.Clone(fields)
	rank := func(f Field) int {
		if i := slices.Index(order, f.Key); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(out, func(a, b Field) int { return rank(a) - rank(b) })
	return out
}

// Kinds are the connector kinds a configuration may name (built by
// internal/connector).
type Kinds struct {
	Sources      []SourceKind
	Destinations []DestinationKind
}

// typed is a source or destination kind.
type typed interface{ Type() string }

// byType is the kind of type t in ks, if registered (the zero K if not).
func byType[K typed](ks []K, t string) K {
	for _, k := range ks {
		if k.Type() == t {
			return k
		}
	}
	var none K
	return none
}

// typesOf are the types of ks, in registration order.
func typesOf[K typed](ks []K) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Type()
	}
	return out
}

// keySets are the keys of each kind of ks.
func keySets[K typed](ks []K, keys func(K) []string) [][]string {
	out := make([][]string, len(ks))
	for i, k := range ks {
		out[i] = keys(k)
	}
	return out
}

// owners are the types of the kinds of ks whose keys hold key.
func owners[K typed](ks []K, keys func(K) []string, key string) []string {
	var out []string
	for _, k := range ks {
		if slices.Contains(keys(k), key) {
			out = append(out, k.Type())
		}
	}
	return out
}

// Value is one value of a kind's key as written, with its path, for the
// kind to decode; a value of the wrong shape is reported at its line.
type Value struct {
	l    *loader
	n    *yaml.Node
	path string
}

// String, Int, Float, Bool, Int64List, StringMap and Duration decode v (zero values
// when it has the wrong shape, which is reported).
func (v Value) String() string               { return v.l.str(v.n, v.path) }
func (v Value) Int() int                     { return v.l.int(v.n, v.path) }
func (v Value) Float() float64               { return v.l.float(v.n, v.path) }
func (v Value) Bool() bool                   { return v.l.bool(v.n, v.path) }
func (v Value) Int64List() []int64           { return v.l.int64List(v.n, v.path) }
func (v Value) StringMap() map[string]string { return v.l.strMap(v.n, v.path) }
func (v Value) Duration() time.Duration      { return v.l.duration(v.n, v.path) }

// OptionalDuration is a duration key a kind has a default for: Set reports
// that it was written.
type OptionalDuration struct {
	D   time.Duration
	Set bool
}

// Decode reads v into o.
func (o *OptionalDuration) Decode(v Value) { o.D, o.Set = v.Duration(), true }

// Or is o's duration, or def when it was not written.
func (o OptionalDuration) Or(def time.Duration) time.Duration {
	if o.Set {
		return o.D
	}
	return def
}

// String is o as a definition stores it ("" when not written).
func (o OptionalDuration) String() string {
	if !o.Set {
		return ""
	}
	return o.D.String()
}

// OptionalInt is an integer key a kind has a default for: Set reports that
// it was written.
type OptionalInt struct {
	N   int64
	Set bool
}

// Decode reads v into o.
func (o *OptionalInt) Decode(v Value) { o.N, o.Set = int64(v.Int()), true }

// Or is o's value, or def when it was not written.
func (o OptionalInt) Or(def int64) int64 {
	if o.Set {
		return o.N
	}
	return def
}

// String is o as a definition stores it ("" when not written).
func (o OptionalInt) String() string {
	if !o.Set {
		return ""
	}
	return strconv.FormatInt(o.N, 10)
}

// Checker reports problems with one sync's keys, at their lines. Paths are
// relative to the sync: "destination.url", "mapping.email".
type Checker struct {
	l    *loader
	sync string // "syncs[i]"
}

func (c *Checker) abs(rel string) string { return c.sync + "." + rel }

// Dir is the config file's directory, against which relative paths resolve.
func (c *Checker) Dir() string { return filepath.Dir(c.l.file) }

// Preflighter is implemented by a source or destination spec that can check
// on this machine, without connecting anywhere, what a run will need (a
// file source's file). Only Validate asks it.
type Preflighter interface {
	Preflight(c *Checker)
}

// CursorDescriber is implemented by a source spec that can say where a
// saved cursor is, in words ("after record 2,000 of contacts.csv"), without
// reading the source: for `status` and the sync page. The words hold no
// secret; they may hold the key values a keyset cursor is made of.
type CursorDescriber interface {
	DescribeCursor(s *Source, cursor string) string
}

// Has reports whether rel was written in the file.
func (c *Checker) Has(rel string) bool { return c.l.has(c.abs(rel)) }

// Bad reports whether rel already has a problem.
func (c *Checker) Bad(rel string) bool { return c.l.bad[c.abs(rel)] }

// Report reports msg about rel, unless it already has a problem.
func (c *Checker) Report(rel, msg string) { c.l.check(c.abs(rel), msg) }

// Required reports rel when value is empty (msg, or "is required"); it
// returns whether value is set.
func (c *Checker) Required(rel, value, msg string) bool { return c.l.required(c.abs(rel), value, msg) }

// Keyset reports source.cursor_column when a keyset-paged source (kind:
// postgres, mysql) has neither it nor an identity: its pages follow one of
// them, so every run would fail (source_query_invalid).
func (c *Checker) Keyset(kind, cursorColumn string, src *Source) {
	if strings.TrimSpace(cursorColumn) == "" && strings.TrimSpace(src.Identity) == "" && !c.Bad("source.identity") {
		c.Report("source.cursor_column", "set cursor_column (a column every write stamps, such as updated_at) or source.identity: a "+
			kind+" source reads its rows in pages, in the order of one of them")
	}
}

// URL reports rel unless raw is an absolute URL of one of schemes (the
// message never echoes the URL: it may hold a password).
func (c *Checker) URL(rel, raw string, schemes ...string) {
	if msg := checkURL(raw, schemes...); msg != "" {
		c.Report(rel, msg)
	}
}

// APIRoot reports rel when raw, a URL that passed URL, is on a vendor's own
// host (hosts: domain suffixes) with a path other than root (the API's root
// path, "" for none): the connector appends the API's paths to it, and
// there they answer 404 with a page that names nothing.
func (c *Checker) APIRoot(rel, raw, vendor string, hosts []string, root string) {
	u, err := url.Parse(raw)
	if err != nil || c.Bad(rel) || !slices.ContainsFunc(hosts, func(h string) bool {
		return u.Hostname() == h || strings.HasSuffix(u.Hostname(), "."+h)
	}) {
		return
	}
	if strings.TrimRight(u.Path, "/") != root {
		c.Report(rel, fmt.Sprintf("%s's API root is %s://%s%s (its paths are added to it)", vendor, u.Scheme, u.Host, root))
	}
}

// Show is value as a message may show it (quoted and clipped, or the names
// of the variables it came from).
func (c *Checker) Show(rel, value string) string { return c.l.show(c.abs(rel), value) }

// ShowPath is a file's path (at rel, made absolute as path) for a message:
// as it is, or, when it came from the environment, the variables' names
// (a value there may be anything, a secret among them).
func (c *Checker) ShowPath(rel, path string) string {
	if c.l.fromEnv(c.abs(rel)) {
		return "the path in " + strings.TrimPrefix(c.Show(rel, path), "the value of ")
	}
	return path
}

// Key is the path of entry name of the map at rel.
func (Checker) Key(rel, name string) string { return join(rel, name) }

// definitionObject writes fields as one JSON object, in order, as
// encoding/json writes a struct's fields.
func definitionObject(fields []Field) (json.RawMessage, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fields {
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("definition key %s: %w", f.Key, err)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return json.RawMessage(b.String()), nil
}

// andList is "a, b and c".
func andList(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// A SourceKind is one source type's part of the configuration: the keys it
// owns under a sync's `source:`, their checks and secrets (config knows
// `type`, `page_size`, `identity` and `max_record_bytes`).
type SourceKind interface {
	Type() string
	NewSpec() SourceSpec
	// SourceKeys name the keys the kind owns, in its messages' order.
	SourceKeys() []string
	// SecretKeys are the keys whose values are secret.
	SecretKeys() []string
}

// SourceSpec is one sync's decoded source keys.
type SourceSpec interface {
	Decode(key string, v Value)
	// Check reports the kind's problems.
	Check(s *Source, c *Checker)
	Secrets() []string
	Redacted() SourceSpec
	// Definition returns the canonical definition's source object; common
	// are type, page_size and identity, in that order, without empty ones.
	Definition(common []Field) []Field
}

// CheckURL is the problem with raw as an absolute URL of one of schemes, or
// "" (it never echoes the URL: it may hold a password).
func CheckURL(raw string, schemes ...string) string { return checkURL(raw, schemes...) }

// RedactDSN hides the password of a postgres:// URL or key=value DSN.
func RedactDSN(dsn string) string { return redactDSN(dsn) }

// DSNSecrets are the passwords a postgres:// URL or key=value DSN holds.
func DSNSecrets(dsn string) []string { return dsnSecrets(dsn) }

// EmptyHint is " (environment variable X is set but empty)" when rel's
// value came from an empty variable, else "".
func (c *Checker) EmptyHint(rel string) string { return c.l.emptyHint(c.abs(rel)) }
