package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

const (
	// maxFileSize bounds what Load reads; a config is a few kilobytes.
	maxFileSize = 4 << 20
	// maxDepth bounds nesting in the interpolation walk and merge chains.
	maxDepth = 64
	// nodeBudget bounds node visits, so aliases cannot blow decoding up.
	nodeBudget = 1_000_000
)

// Load reads, interpolates, decodes, defaults and validates the configuration
// file at path. env looks variables up (nil means os.LookupEnv); kinds are
// the connector kinds a sync may name (internal/connector.Kinds). An invalid
// configuration returns a *Problems listing every problem; a file that cannot
// be read returns that I/O error, wrapped.
func Load(path string, env func(string) (string, bool), kinds Kinds) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, env, kinds)
}

// readFile reads a config file, up to one byte past maxFileSize (Parse
// says when it is too large).
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A new user's first command, run where no oncesync.yaml is (the
		// default --config): say what to do, not only what failed.
		return nil, fmt.Errorf("config: %w; write one (docs/config.md) or name yours with --config FILE", err)
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	return data, nil
}

// Parse is Load on bytes already read; file names them in problems.
func Parse(file string, data []byte, env func(string) (string, bool), kinds Kinds) (*Config, error) {
	return parse(file, data, env, kinds, parseOpts{})
}

// LoadSync is Load for a command that acts on sync id alone (run, its dry
// run, check): another sync that references an unset ${VAR} does not stop
// it, since a sync run from cron needs none of its siblings' secrets
// (docs/config.md#environment-variables). That sync's problems are left out
// of the error, not only the unset variables: its empty values may explain
// the others. The sync is still in the Config, as written, for its id; it
// is checked in full when it is run, and by Validate. Every other problem
// is reported as Load reports it.
func LoadSync(path string, env func(string) (string, bool), kinds Kinds, id string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSync(path, data, env, kinds, id)
}

// ParseSync is LoadSync on bytes already read.
func ParseSync(file string, data []byte, env func(string) (string, bool), kinds Kinds, id string) (*Config, error) {
	return parse(file, data, env, kinds, parseOpts{oneSync: true, syncID: id})
}

// Validate is Load for `oncesync validate`: it also asks every source and
// destination spec that can (a Preflighter) to check, on this machine and
// without connecting anywhere, what a run will need (a file source's file).
// Load leaves that to the run: a file may appear between a serve's start
// and a sync's schedule.
func Validate(path string, env func(string) (string, bool), kinds Kinds) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, data, env, kinds, parseOpts{preflight: true})
}

// parseOpts say what a command needs checked.
type parseOpts struct {
	preflight bool // Validate: ask Preflighters too
	// oneSync: the command acts on sync syncID alone (LoadSync).
	oneSync bool
	syncID  string
}

func parse(file string, data []byte, env func(string) (string, bool), kinds Kinds, o parseOpts) (*Config, error) {
	if env == nil {
		env = os.LookupEnv
	}
	l := &loader{
		file:      file,
		pos:       map[string]*yaml.Node{},
		keys:      map[string]*yaml.Node{},
		val:       map[string]*yaml.Node{},
		bad:       map[string]bool{},
		listed:    map[string]bool{},
		unsetIn:   map[int]bool{},
		budget:    nodeBudget,
		kinds:     kinds,
		preflight: o.preflight,
	}
	var cfg *Config
	if len(data) > maxFileSize {
		l.add(0, 0, "", fmt.Sprintf("the file is larger than %d MiB", maxFileSize>>20))
		return nil, &Problems{List: l.probs}
	}
	protected, refs := protect(data)
	if root := l.parse(data, protected); root != nil {
		l.pos[""] = root
		l.interp = interpolateTree(root, refs, env)
		cfg = l.config(root)
		cfg.Path = file
		cfg.envSecrets = l.envSecrets(cfg, env)
		for i := range cfg.Syncs {
			cfg.Syncs[i].hidden = cfg.envSecrets
		}
		l.applyDefaults(cfg)
		l.validate(cfg)
	}
	probs := l.probs
	if o.oneSync && cfg != nil {
		probs = l.problemsFor(cfg, o.syncID)
	}
	if len(probs) > 0 {
		p := &Problems{List: probs}
		p.sort()
		if o.oneSync && cfg != nil && onlyInSync(cfg, o.syncID, probs) {
			p.sound = cfg
		}
		return nil, p
	}
	cfg.warnLines = map[string]int{}
	for _, w := range cfg.Warnings() {
		field, _, _ := strings.Cut(w, ": ")
		cfg.warnLines[field], _ = l.lineOf(field)
	}
	return cfg, nil
}

// secretPathRE matches the fields whose values are secret, or (store, redis,
// DSNs) may embed one.
// (A source's or destination's secret keys are its kind's SecretKeys.)
var secretPathRE = regexp.MustCompile(`^(store|redis|alerts\.webhook\.secret|alerts\.email\.password|alerts\.sentry\.dsn|web\.api_tokens\[\d+\](\.token)?|web\.users(\.[A-Za-z0-9_-]+|\[".*"\])(\.hash)?|web\.oidc\.client_secret|syncs\[\d+\]\.heartbeat_url)$`)

// kindKeyRE splits a path under a sync's source or destination: the sync's
// index, which of the two, and its key.
var kindKeyRE = regexp.MustCompile(`^syncs\[(\d+)\]\.(destination|source)\.([A-Za-z0-9_-]+)`)

// envSecrets returns the values of the environment variables interpolated
// into secret fields.
func (l *loader) envSecrets(cfg *Config, env func(string) (string, bool)) []string {
	var out []string
	for path, n := range l.val {
		if !secretPathRE.MatchString(path) && !l.kindSecret(cfg, path) {
			continue
		}
		for _, name := range l.interp[n].vars {
			if v, ok := env(name); ok && v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// kindSecret reports whether path is (inside) a secret key of its sync's
// source or destination kind.
func (l *loader) kindSecret(cfg *Config, path string) bool {
	m := kindKeyRE.FindStringSubmatch(path)
	if m == nil {
		return false
	}
	i, err := strconv.Atoi(m[1])
	if err != nil || i >= len(cfg.Syncs) {
		return false
	}
	if m[2] == "source" {
		k := byType(l.kinds.Sources, cfg.Syncs[i].Source.Type)
		return k != nil && slices.Contains(k.SecretKeys(), m[3])
	}
	k := byType(l.kinds.Destinations, cfg.Syncs[i].Destination.Type)
	return k != nil && slices.Contains(k.SecretKeys(), m[3])
}

// loader decodes one file, collecting problems.
type loader struct {
	file      string
	preflight bool // Validate: ask Preflighters too
	probs     []Problem
	pos       map[string]*yaml.Node // field path -> node as written (for lines)
	keys      map[string]*yaml.Node // field path -> its key node
	val       map[string]*yaml.Node // field path -> value node (aliases resolved)
	bad       map[string]bool       // field paths with a reported problem
	interp    map[*yaml.Node]interp
	budget    int
	spent     bool
	kinds     Kinds
	entries   []string        // web.users / web.api_tokens entries written as mappings
	listed    map[string]bool // workspaces lists written (an empty one is refused)
	unsetIn   map[int]bool    // syncs (by index) with a field that references an unset variable
}

// syncFieldRE matches a field path inside a sync, and its index.
var syncFieldRE = regexp.MustCompile(`^syncs\[(\d+)\]`)

// syncIndex is the index of the sync the field at path is in. Its id is
// not: a sync whose id is unset cannot be named, and a duplicate id
// concerns both syncs.
func syncIndex(path string) (int, bool) {
	m := syncFieldRE.FindStringSubmatch(path)
	if m == nil || path == m[0]+".id" {
		return 0, false
	}
	i, err := strconv.Atoi(m[1])
	return i, err == nil
}

// onlyInSync reports whether every problem lies in sync id's own entry of
// cfg (its destination's unset variable, a wrong type in its mapping), so
// that the top level (store, redis, settings, alerts) was read as written.
func onlyInSync(cfg *Config, id string, probs []Problem) bool {
	for _, p := range probs {
		i, ok := syncIndex(p.Field)
		if !ok || i >= len(cfg.Syncs) || cfg.Syncs[i].ID != id || id == "" {
			return false
		}
	}
	return true
}

// problemsFor are the problems of a command that acts on sync id alone:
// all but those of the other syncs that reference an unset variable
// (LoadSync).
func (l *loader) problemsFor(cfg *Config, id string) []Problem {
	var out []Problem
	for _, p := range l.probs {
		if i, ok := syncIndex(p.Field); ok && l.unsetIn[i] && i < len(cfg.Syncs) && cfg.Syncs[i].ID != id {
			continue
		}
		out = append(out, p)
	}
	return out
}

type pair struct{ key, val *yaml.Node }

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse returns the root node of the single document in data, or nil after
// reporting why there is none.
func (l *loader) parse(data, protected []byte) (root *yaml.Node) {
	defer func() {
		// yaml.v3 has panicked on malformed input before; never let a
		// config file crash the binary.
		if r := recover(); r != nil {
			l.add(0, 0, "", "cannot parse YAML")
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(protected))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			l.add(1, 0, "", "the file is empty")
		} else {
			l.yamlError(err, data)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		l.add(extra.Line, extra.Column, "", "the file holds more than one YAML document; put everything in one")
		return nil
	case !errors.Is(err, io.EOF):
		l.yamlError(err, data)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		l.add(1, 0, "", "the file is empty")
		return nil
	}
	root = doc.Content[0]
	if root.Kind == yaml.AliasNode {
		root = root.Alias
	}
	if root == nil || isNull(root) {
		l.add(1, 0, "", "the file is empty")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		l.add(root.Line, root.Column, "", "the top level must be a mapping of keys (store, settings, syncs, ...), got "+kindName(root))
		return nil
	}
	return root
}

// yamlError reports a yaml.v3 syntax error. yaml.v3 prints 1-based lines
// for scanner errors but 0-based ones (and none on the first line) for parser
// errors; this puts both on the 1-based line.
func (l *loader) yamlError(err error, data []byte) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if isParserError(msg) {
		line++
	}
	if m := unknownAnchorRE.FindStringSubmatch(msg); m != nil {
		for i, text := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(text, []byte("*"+m[1])) {
				line = i + 1
				break
			}
		}
	}
	if line == 0 && !strings.HasPrefix(msg, "unknown anchor") {
		line = 1
	}
	if n := bytes.Count(data, []byte("\n")) + 1; line > n {
		line = n
	}
	l.add(line, 0, "", "invalid YAML: "+msg)
}

var unknownAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// isParserError reports whether msg is one of yaml.v3's parser (not scanner)
// errors (parserc.go).
func isParserError(msg string) bool {
	for _, p := range []string{
		"did not find expected <", "did not find expected node content",
		"did not find expected '-' indicator", "did not find expected key",
		"did not find expected ','", "found undefined tag handle",
		"found duplicate %", "found incompatible YAML document",
	} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func (l *loader) add(line, col int, field, msg string) {
	l.probs = append(l.probs, Problem{File: l.file, Line: line, Column: col, Field: field, Msg: msg})
}

// report adds a problem about the field at path, located at the field's
// node (or its nearest recorded parent), and marks the field bad.
func (l *loader) report(path, msg string) {
	line, col := l.lineOf(path)
	l.add(line, col, path, msg)
	l.bad[path] = true
}

// reportNode adds a problem about the field at path, located at n.
func (l *loader) reportNode(n *yaml.Node, path, msg string) {
	l.add(n.Line, n.Column, path, msg)
	l.bad[path] = true
}

// lineOf locates the field at path: its value when written, else the key of
// its nearest written parent (a missing field is reported where its parent
// starts).
func (l *loader) lineOf(path string) (int, int) {
	if n, ok := l.pos[path]; ok {
		return n.Line, n.Column
	}
	for p := parent(path); ; p = parent(p) {
		if n, ok := l.keys[p]; ok {
			return n.Line, n.Column
		}
		if n, ok := l.pos[p]; ok {
			return n.Line, n.Column
		}
		if p == "" {
			return 0, 0
		}
	}
}

// parent drops the last element of a field path.
func parent(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	if plainKeyRE.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// has reports whether the field at path was written in the file.
func (l *loader) has(path string) bool { _, ok := l.pos[path]; return ok }

// resolve follows an alias and spends budget; nil once the budget is gone.
func (l *loader) resolve(n *yaml.Node) *yaml.Node {
	if l.budget <= 0 {
		if !l.spent {
			l.spent = true
			l.add(0, 0, "", "the file expands to too many values (aliases?); simplify it")
		}
		return nil
	}
	l.budget--
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing"
		}
		return "a single value"
	default:
		return "something else"
	}
}

// fields decodes the mapping v at path: each key calls its handler, unknown
// and duplicate keys are reported. A null v is an empty mapping. It reports
// whether v was a mapping.
func (l *loader) fields(v *yaml.Node, path string, h map[string]func(v *yaml.Node, path string)) bool {
	n := l.resolve(v)
	if n == nil || isNull(n) {
		return false
	}
	if n.Kind != yaml.MappingNode {
		l.report(path, "must be a mapping, got "+kindName(n))
		return false
	}
	known := make([]string, 0, len(h))
	for k := range h {
		known = append(known, k)
	}
	sort.Strings(known)
	seen := map[string]*yaml.Node{}
	for _, pr := range l.pairs(n, path, 0) {
		k := l.resolve(pr.key)
		if k == nil {
			return true
		}
		if k.Kind != yaml.ScalarNode {
			l.reportNode(k, path, "keys must be plain names, got "+kindName(k))
			continue
		}
		name := k.Value
		p := join(path, name)
		if first, dup := seen[name]; dup {
			l.reportNode(k, p, fmt.Sprintf("duplicate key %q (first set at line %d)", clip(name), first.Line))
			continue
		}
		seen[name] = k
		if path == "" && strings.HasPrefix(name, "x-") {
			// An extension field, as in Compose files: a place for YAML
			// anchors the syncs refer to (docs/config.md#top-level).
			continue
		}
		fn, ok := h[name]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", clip(name))
			if s := suggest(name, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (valid keys: " + strings.Join(known, ", ") + ")"
			}
			l.reportNode(k, p, msg)
			continue
		}
		l.pos[p] = pr.val
		l.keys[p] = k
		fn(pr.val, p)
	}
	return true
}

// pairs lists the key/value pairs of mapping n, expanding merge keys (<<):
// keys written in n win over merged ones, earlier merged mappings over later.
func (l *loader) pairs(n *yaml.Node, path string, depth int) []pair {
	var explicit, merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			src := l.resolve(v)
			if src == nil {
				continue
			}
			srcs := []*yaml.Node{src}
			if src.Kind == yaml.SequenceNode {
				srcs = src.Content
			}
			for _, s := range srcs {
				m := l.resolve(s)
				if m == nil {
					continue
				}
				if m.Kind != yaml.MappingNode {
					l.reportNode(k, path, "<< must merge a mapping (or a list of mappings), got "+kindName(m))
					continue
				}
				if depth >= maxDepth {
					l.reportNode(k, path, "<< merges are nested too deep (does an anchor merge itself?)")
					continue
				}
				merged = append(merged, l.pairs(m, path, depth+1)...)
			}
			continue
		}
		explicit = append(explicit, pair{k, v})
	}
	if len(merged) == 0 {
		return explicit
	}
	taken := map[string]bool{}
	for _, p := range explicit {
		if p.key.Kind == yaml.ScalarNode {
			taken[p.key.Value] = true
		}
	}
	out := explicit
	for _, p := range merged {
		if p.key.Kind == yaml.ScalarNode {
			if taken[p.key.Value] {
				continue
			}
			taken[p.key.Value] = true
		}
		out = append(out, p)
	}
	return out
}

// list decodes the sequence v at path, calling fn for each item. A null v is
// an empty list.
func (l *loader) list(v *yaml.Node, path string, fn func(item *yaml.Node, path string)) {
	n := l.resolve(v)
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		l.report(path, "must be a list, got "+kindName(n))
		return
	}
	for i, it := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		l.pos[p] = it
		fn(it, p)
	}
}

// scalar returns the (interpolated) text of a single value. ok is false after
// a reported problem. A null value is "".
func (l *loader) scalar(v *yaml.Node, path, want string) (s string, ok bool) {
	n := l.resolve(v)
	if n == nil {
		return "", false
	}
	l.val[path] = n
	if n.Kind != yaml.ScalarNode {
		l.report(path, "must be "+want+", got "+kindName(n))
		return "", false
	}
	if in, found := l.interp[n]; found {
		if in.err != "" {
			l.report(path, in.err)
			return "", false
		}
		if len(in.unset) > 0 {
			l.report(path, unsetMsg(in.unset))
			if i, ok := syncIndex(path); ok {
				l.unsetIn[i] = true
			}
			return "", false
		}
	}
	if isNull(n) {
		return "", true
	}
	return n.Value, true
}

func unsetMsg(vars []string) string {
	if len(vars) == 1 {
		return fmt.Sprintf("environment variable %s is not set", vars[0])
	}
	return fmt.Sprintf("environment variables %s are not set", strings.Join(vars, ", "))
}

// show quotes the value of the field at path for a message, or names the
// environment variables it came from (which may hold secrets). Never call it
// for secret fields.
func (l *loader) show(path, value string) string {
	if l.fromEnv(path) {
		in := l.interp[l.val[path]]
		return "the value of ${" + strings.Join(in.vars, "}, ${") + "}"
	}
	return strconv.Quote(clip(value))
}

// fromEnv reports whether the value of the field at path came (in part) from
// the environment.
func (l *loader) fromEnv(path string) bool {
	if n := l.val[path]; n != nil {
		if in, ok := l.interp[n]; ok && len(in.vars) > 0 {
			return true
		}
	}
	return false
}

// clip shortens s for a message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// emptyHint explains why a field holding only ${VAR} is empty.
func (l *loader) emptyHint(path string) string {
	if n := l.val[path]; n != nil {
		if in, ok := l.interp[n]; ok && len(in.empty) > 0 {
			return fmt.Sprintf(" (environment variable %s is set but empty)", strings.Join(in.empty, ", "))
		}
	}
	return ""
}

func (l *loader) str(v *yaml.Node, path string) string {
	s, _ := l.scalar(v, path, "a string")
	return s
}

func (l *loader) integer(v *yaml.Node, path string) int64 {
	s, ok := l.scalar(v, path, "an integer")
	if !ok {
		return 0
	}
	i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		l.report(path, "must be an integer, got "+l.show(path, s))
		return 0
	}
	return i
}

func (l *loader) int(v *yaml.Node, path string) int {
	i := l.integer(v, path)
	if i > 1<<31-1 || i < -1<<31 {
		l.report(path, "is out of range")
		return 0
	}
	return int(i)
}

func (l *loader) float(v *yaml.Node, path string) float64 {
	s, ok := l.scalar(v, path, "a number")
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f != f || f > 1e12 || f < -1e12 {
		l.report(path, "must be a number, got "+l.show(path, s))
		return 0
	}
	return f
}

func (l *loader) bool(v *yaml.Node, path string) bool {
	s, ok := l.scalar(v, path, "true or false")
	if !ok {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true
	case "false":
		return false
	}
	l.report(path, "must be true or false, got "+l.show(path, s))
	return false
}

func (l *loader) duration(v *yaml.Node, path string) time.Duration {
	s, ok := l.scalar(v, path, "a duration")
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		l.report(path, "must be a duration like 30s, 10m, 24h or 168h, got "+l.show(path, s))
		return 0
	}
	return d
}

func (l *loader) strList(v *yaml.Node, path string) []string {
	var out []string
	l.list(v, path, func(it *yaml.Node, p string) { out = append(out, l.str(it, p)) })
	return out
}

func (l *loader) int64List(v *yaml.Node, path string) []int64 {
	var out []int64
	l.list(v, path, func(it *yaml.Node, p string) { out = append(out, l.integer(it, p)) })
	return out
}

// strMap decodes a mapping of user-chosen names to strings.
func (l *loader) strMap(v *yaml.Node, path string) map[string]string {
	n := l.resolve(v)
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		l.report(path, "must be a mapping, got "+kindName(n))
		return nil
	}
	out := map[string]string{}
	seen := map[string]*yaml.Node{}
	for _, pr := range l.pairs(n, path, 0) {
		k := l.resolve(pr.key)
		if k == nil {
			break
		}
		if k.Kind != yaml.ScalarNode {
			l.reportNode(k, path, "keys must be plain names, got "+kindName(k))
			continue
		}
		p := join(path, k.Value)
		if strings.TrimSpace(k.Value) == "" {
			l.reportNode(k, p, "empty name")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			l.reportNode(k, p, fmt.Sprintf("duplicate key %q (first set at line %d)", clip(k.Value), first.Line))
			continue
		}
		seen[k.Value] = k
		l.pos[p] = pr.val
		l.keys[p] = k
		out[k.Value] = l.str(pr.val, p)
	}
	return out
}

// handlers is the decoding table of one mapping.
type handlers = map[string]func(v *yaml.Node, path string)

func (l *loader) config(root *yaml.Node) *Config {
	c := &Config{}
	l.fields(root, "", handlers{
		"store":                func(v *yaml.Node, p string) { c.Store = l.str(v, p) },
		"redis":                func(v *yaml.Node, p string) { c.Redis = l.str(v, p) },
		"redis_namespace":      func(v *yaml.Node, p string) { c.RedisNamespace = l.str(v, p) },
		"settings":             func(v *yaml.Node, p string) { c.Settings = l.settings(v, p) },
		"alerts":               func(v *yaml.Node, p string) { c.Alerts = l.alerts(v, p) },
		"web":                  func(v *yaml.Node, p string) { c.Web = l.web(v, p) },
		"allow_evicting_redis": func(v *yaml.Node, p string) { c.AllowEvictingRedis = l.bool(v, p) },
		"syncs": func(v *yaml.Node, p string) {
			l.list(v, p, func(it *yaml.Node, ip string) { c.Syncs = append(c.Syncs, l.sync(it, ip)) })
		},
	})
	return c
}

func (l *loader) settings(v *yaml.Node, path string) Settings {
	var s Settings
	l.fields(v, path, handlers{
		"lease_ttl":        func(v *yaml.Node, p string) { s.LeaseTTL = l.duration(v, p) },
		"lease_renew":      func(v *yaml.Node, p string) { s.LeaseRenew = l.duration(v, p) },
		"breaker_failures": func(v *yaml.Node, p string) { s.BreakerFailures = l.int(v, p) },
		"deadman_window":   func(v *yaml.Node, p string) { s.DeadmanWindow = l.duration(v, p) },
		"ledger_retention": func(v *yaml.Node, p string) { s.LedgerRetention = l.duration(v, p) },
		"max_removals":     func(v *yaml.Node, p string) { s.MaxRemovals = l.removals(v, p) },
		"in_doubt_grace":   func(v *yaml.Node, p string) { s.InDoubtGrace = l.duration(v, p) },
	})
	return s
}

// removals decodes a bound on removals: a count (500) or a percentage
// ("10%", 0 to 100).
func (l *loader) removals(v *yaml.Node, path string) Removals {
	raw := strings.TrimSpace(l.str(v, path))
	if raw == "" {
		return Removals{}
	}
	if pct, ok := strings.CutSuffix(raw, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || f < 0 || f > 100 {
			l.check(path, "must be a count (500) or a percentage from 0% to 100% (10%), got "+l.show(path, raw))
			return Removals{}
		}
		if f == 0 {
			return Removals{Set: true}
		}
		return Removals{Percent: f, Set: true}
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		l.check(path, "must be a count (500) or a percentage from 0% to 100% (10%), got "+l.show(path, raw))
		return Removals{}
	}
	return Removals{Count: n, Set: true}
}

func (l *loader) alerts(v *yaml.Node, path string) Alerts {
	var a Alerts
	l.fields(v, path, handlers{
		"webhook": func(v *yaml.Node, p string) {
			l.fields(v, p, handlers{
				"url":    func(v *yaml.Node, p string) { a.Webhook.URL = l.str(v, p) },
				"secret": func(v *yaml.Node, p string) { a.Webhook.Secret = l.str(v, p) },
			})
		},
		"email": func(v *yaml.Node, p string) {
			e := &a.Email
			l.fields(v, p, handlers{
				"host":     func(v *yaml.Node, p string) { e.Host = l.str(v, p) },
				"port":     func(v *yaml.Node, p string) { e.Port = l.int(v, p) },
				"username": func(v *yaml.Node, p string) { e.Username = l.str(v, p) },
				"password": func(v *yaml.Node, p string) { e.Password = l.str(v, p) },
				"from":     func(v *yaml.Node, p string) { e.From = l.str(v, p) },
				"to":       func(v *yaml.Node, p string) { e.To = l.strList(v, p) },
				"starttls": func(v *yaml.Node, p string) { e.StartTLS = l.bool(v, p) },
			})
		},
		"sentry": func(v *yaml.Node, p string) {
			l.fields(v, p, handlers{
				"dsn": func(v *yaml.Node, p string) { a.Sentry.DSN = l.str(v, p) },
			})
		},
	})
	return a
}

func (l *loader) web(v *yaml.Node, path string) Web {
	var w Web
	l.fields(v, path, handlers{
		"listen":     func(v *yaml.Node, p string) { w.Listen = l.str(v, p) },
		"url":        func(v *yaml.Node, p string) { w.URL = l.str(v, p) },
		"api_tokens": func(v *yaml.Node, p string) { w.APITokens = l.apiTokens(v, p) },
		"users":      func(v *yaml.Node, p string) { w.Users = l.users(v, p) },
		"oidc":       func(v *yaml.Node, p string) { w.OIDC = l.oidc(v, p) },
		"secure":     func(v *yaml.Node, p string) { w.Secure = l.bool(v, p) },
		"tls_cert":   func(v *yaml.Node, p string) { w.TLSCert = l.str(v, p) },
		"tls_key":    func(v *yaml.Node, p string) { w.TLSKey = l.str(v, p) },
	})
	return w
}

// access decodes the role and workspaces keys of a user or token.
func (l *loader) access(a *Access) handlers {
	return handlers{
		"role":       func(v *yaml.Node, p string) { a.Role = l.str(v, p) },
		"workspaces": func(v *yaml.Node, p string) { a.Workspaces = l.strList(v, p); l.listed[p] = true },
	}
}

// users decodes web.users: each name maps to a bare hash (admin of every
// workspace) or to {hash, role, workspaces}.
func (l *loader) users(v *yaml.Node, path string) map[string]User {
	n := l.resolve(v)
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		l.report(path, "must be a mapping, got "+kindName(n))
		return nil
	}
	out := map[string]User{}
	seen := map[string]*yaml.Node{}
	for _, pr := range l.pairs(n, path, 0) {
		k := l.resolve(pr.key)
		if k == nil {
			break
		}
		if k.Kind != yaml.ScalarNode {
			l.reportNode(k, path, "keys must be plain names, got "+kindName(k))
			continue
		}
		p := join(path, k.Value)
		if strings.TrimSpace(k.Value) == "" {
			l.reportNode(k, p, "empty name")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			l.reportNode(k, p, fmt.Sprintf("duplicate key %q (first set at line %d)", clip(k.Value), first.Line))
			continue
		}
		seen[k.Value] = k
		l.pos[p] = pr.val
		l.keys[p] = k
		var u User
		if val := l.resolve(pr.val); val != nil && val.Kind == yaml.MappingNode {
			h := l.access(&u.Access)
			h["hash"] = func(v *yaml.Node, p string) { u.Hash = l.str(v, p) }
			l.fields(val, p, h)
			l.entries = append(l.entries, p)
		} else {
			u.Hash = l.str(pr.val, p)
			u.Role = RoleAdmin
		}
		out[k.Value] = u
	}
	return out
}

// apiTokens decodes web.api_tokens: each item is a bare token (an admin
// of every workspace named token-N) or {name, token, role, workspaces}.
func (l *loader) apiTokens(v *yaml.Node, path string) []APIToken {
	var out []APIToken
	l.list(v, path, func(it *yaml.Node, p string) {
		t := APIToken{}
		if val := l.resolve(it); val != nil && val.Kind == yaml.MappingNode {
			h := l.access(&t.Access)
			h["name"] = func(v *yaml.Node, p string) { t.Name = l.str(v, p) }
			h["token"] = func(v *yaml.Node, p string) { t.Token = l.str(v, p) }
			l.fields(val, p, h)
			l.entries = append(l.entries, p)
		} else {
			t.Token = l.str(it, p)
			t.Name = fmt.Sprintf("token-%d", len(out)+1)
			t.Role = RoleAdmin
		}
		out = append(out, t)
	})
	return out
}

func (l *loader) oidc(v *yaml.Node, path string) *OIDC {
	o := &OIDC{}
	if !l.fields(v, path, handlers{
		"issuer":           func(v *yaml.Node, p string) { o.Issuer = l.str(v, p) },
		"client_id":        func(v *yaml.Node, p string) { o.ClientID = l.str(v, p) },
		"client_secret":    func(v *yaml.Node, p string) { o.ClientSecret = l.str(v, p) },
		"roles_claim":      func(v *yaml.Node, p string) { o.RolesClaim = l.str(v, p) },
		"workspaces_claim": func(v *yaml.Node, p string) { o.WorkspacesClaim = l.str(v, p) },
		"redirect_url":     func(v *yaml.Node, p string) { o.RedirectURL = l.str(v, p) },
		"scopes":           func(v *yaml.Node, p string) { o.Scopes = l.strList(v, p) },
	}) {
		return nil
	}
	return o
}

func (l *loader) sync(v *yaml.Node, path string) Sync {
	var (
		s           Sync
		mapping     *yaml.Node
		mappingPath string
	)
	ok := l.fields(v, path, handlers{
		"id":          func(v *yaml.Node, p string) { s.ID = l.str(v, p) },
		"workspace":   func(v *yaml.Node, p string) { s.Workspace = l.str(v, p) },
		"schedule":    func(v *yaml.Node, p string) { s.Schedule = l.str(v, p) },
		"source":      func(v *yaml.Node, p string) { s.Source = l.source(v, p) },
		"destination": func(v *yaml.Node, p string) { s.Destination = l.destination(v, p) },
		// Decoded once the destination's type is known, wherever it is written.
		"mapping":                       func(v *yaml.Node, p string) { mapping, mappingPath = v, p },
		"partitions":                    func(v *yaml.Node, p string) { s.Partitions = l.int(v, p) },
		"allow_rewrite_after_retention": func(v *yaml.Node, p string) { s.AllowRewriteAfterRetention = l.bool(v, p) },
		"ledger_retention":              func(v *yaml.Node, p string) { s.LedgerRetention = l.duration(v, p) },
		"deadman_window":                func(v *yaml.Node, p string) { s.DeadmanWindow = l.duration(v, p) },
		"breaker_failures":              func(v *yaml.Node, p string) { s.BreakerFailures = l.int(v, p) },
		"max_removals":                  func(v *yaml.Node, p string) { s.MaxRemovals = l.removals(v, p) },
		"heartbeat_url":                 func(v *yaml.Node, p string) { s.HeartbeatURL = l.str(v, p) },
	})
	if !ok && !l.bad[path] {
		l.report(path, "must be a mapping with id, source, destination and mapping, got nothing")
	}
	if mapping != nil {
		l.mapping(mapping, mappingPath, &s.Destination)
	}
	return s
}

func (l *loader) source(v *yaml.Node, path string) Source {
	var s Source
	l.kindFields(v, path, handlers{
		"type":      func(v *yaml.Node, p string) { s.Type = l.str(v, p) },
		"page_size": func(v *yaml.Node, p string) { s.PageSize = l.int(v, p) },
		"identity":  func(v *yaml.Node, p string) { s.Identity = l.str(v, p) },
		"max_record_bytes": func(v *yaml.Node, p string) {
			s.MaxRecordBytes = l.int(v, p)
		},
		"timeout": func(v *yaml.Node, p string) { s.Timeout = l.duration(v, p) },
	}, keySets(l.kinds.Sources, SourceKind.SourceKeys), func() ([]string, func(string, Value)) {
		k := byType(l.kinds.Sources, s.Type)
		if k == nil {
			return nil, nil
		}
		s.Spec = k.NewSpec()
		return k.SourceKeys(), s.Spec.Decode
	})
	return s
}

// kindFields decodes the mapping v of a source or destination: the common
// keys at once, the keys of every kind (all) once the mapping is read, when
// the type it holds is known: kind returns the keys that type owns and
// their decoder. Another kind's key is left to validation (it is reported
// as not used), and walked only to count what it expands to.
func (l *loader) kindFields(v *yaml.Node, path string, common handlers, all [][]string, kind func() ([]string, func(string, Value))) {
	type held struct {
		key  string
		v    *yaml.Node
		path string
	}
	var own []held
	for _, keys := range all {
		for _, key := range keys {
			if _, ok := common[key]; !ok {
				common[key] = func(v *yaml.Node, p string) { own = append(own, held{key, v, p}) }
			}
		}
	}
	l.fields(v, path, common)
	owned, decode := kind()
	for _, o := range own {
		if slices.Contains(owned, o.key) {
			decode(o.key, Value{l, o.v, o.path})
		} else {
			l.skim(o.v)
		}
	}
}

// destination decodes the keys every destination has, and hands the others
// to the kind its type names (a key of another kind is reported by
// validateDestination; with no known type, the keys of every kind are
// accepted and left undecoded).
func (l *loader) destination(v *yaml.Node, path string) Destination {
	var d Destination
	l.kindFields(v, path, handlers{
		"type":        func(v *yaml.Node, p string) { d.Type = l.str(v, p) },
		"mode":        func(v *yaml.Node, p string) { d.Mode = l.str(v, p) },
		"concurrency": func(v *yaml.Node, p string) { d.Concurrency = l.int(v, p) },
		"timeout":     func(v *yaml.Node, p string) { d.Timeout = l.duration(v, p) },
		"rate_limit":  func(v *yaml.Node, p string) { d.RateLimit = l.float(v, p) },
		"write_mode":  func(v *yaml.Node, p string) { d.WriteMode = l.str(v, p) },
		"account":     func(v *yaml.Node, p string) { d.Account = l.str(v, p) },
	}, keySets(l.kinds.Destinations, DestinationKind.DestinationKeys), func() ([]string, func(string, Value)) {
		k := byType(l.kinds.Destinations, d.Type)
		if k == nil {
			return nil, nil
		}
		d.Spec = k.NewSpec()
		spec := d.Spec
		return k.DestinationKeys(), func(key string, v Value) { spec.Decode(key, false, v) }
	})
	return d
}

// skim walks a value no kind decodes, so that what it expands to (aliases,
// merge keys) is counted against the file's budget like a decoded value.
func (l *loader) skim(v *yaml.Node) {
	n := l.resolve(v)
	if n == nil {
		return
	}
	for _, c := range n.Content {
		l.skim(c)
	}
}

// mapping decodes a sync's mapping: into its destination's spec, like
// destination's own keys.
func (l *loader) mapping(v *yaml.Node, path string, d *Destination) {
	l.kindFields(v, path, handlers{}, keySets(l.kinds.Destinations, DestinationKind.MappingKeys), func() ([]string, func(string, Value)) {
		k := byType(l.kinds.Destinations, d.Type)
		if k == nil || d.Spec == nil {
			return nil, nil
		}
		spec := d.Spec
		return k.MappingKeys(), func(key string, v Value) { spec.Decode(key, true, v) }
	})
}
