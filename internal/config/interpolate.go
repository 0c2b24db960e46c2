package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// interp records what interpolation did to one scalar node.
type interp struct {
	vars  []string // variables referenced (in order)
	unset []string // referenced, unset and without a default
	empty []string // referenced with ${VAR}, set but empty
	err   string   // syntax error, if any
}

// UnsetPlaceholder begins the value an env lookup gives a variable that is
// unset where the caller tolerates it (the read-only commands: status, runs,
// records ...): such a variable is unset for ${VAR:-default}, which then
// takes its default.
const UnsetPlaceholder = "oncesync-unset-variable"

// interpolate replaces ${VAR} and ${VAR:-default} in s. "$${" is a literal
// "${". A ${VAR} whose variable is unset is replaced by "" and recorded in
// unset; ${VAR:-default} uses default when VAR is unset or empty.
func interpolate(s string, env func(string) (string, bool)) (string, interp) {
	var in interp
	if !strings.Contains(s, "${") {
		return s, in
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			in.err = `unterminated "${" (write "$${" for a literal "${")`
			return "", in
		}
		expr := s[i+2 : i+2+end]
		i += 2 + end + 1
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validVarName(name) {
			in.err = fmt.Sprintf("invalid environment variable name %q in \"${%s}\" (use letters, digits and _)", name, name)
			return "", in
		}
		in.vars = append(in.vars, name)
		val, ok := env(name)
		switch {
		case hasDef && (!ok || val == "" || strings.HasPrefix(val, UnsetPlaceholder)):
			b.WriteString(def)
		case !ok:
			in.unset = append(in.unset, name)
		case val == "":
			in.empty = append(in.empty, name)
		default:
			b.WriteString(val)
		}
	}
	return b.String(), in
}

func validVarName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// refs protects ${...} references from the YAML parser. A plain scalar in a
// flow collection cannot hold '{' or '}', so `{api_key: ${BREVO_API_KEY}}`
// (docs/guide.md#commands writes exactly that) is not valid YAML as written. Before
// parsing, every ${...} (and $${...}) on one line is replaced by a
// placeholder made of letters, digits and '_', valid anywhere a scalar is;
// after parsing, placeholders are put back in keys and interpolated in values.
type refs struct {
	prefix string
	orig   []string
	re     *regexp.Regexp
}

var refRE = regexp.MustCompile(`\$?\$\{[^}\n]*\}`)

// protect returns data with every reference replaced by a placeholder.
func protect(data []byte) ([]byte, *refs) {
	r := &refs{prefix: "zzOnceSyncRef"}
	if !refRE.Match(data) {
		return data, r
	}
	for bytes.Contains(data, []byte(r.prefix)) {
		r.prefix += "Q"
	}
	r.re = regexp.MustCompile(regexp.QuoteMeta(r.prefix) + `(\d+)_`)
	out := refRE.ReplaceAllFunc(data, func(m []byte) []byte {
		r.orig = append(r.orig, string(m))
		return []byte(r.prefix + strconv.Itoa(len(r.orig)-1) + "_")
	})
	return out, r
}

// restore puts the original references back into s.
func (r *refs) restore(s string) string {
	if r.re == nil || !strings.Contains(s, r.prefix) {
		return s
	}
	return r.re.ReplaceAllStringFunc(s, func(m string) string {
		i, err := strconv.Atoi(m[len(r.prefix) : len(m)-1])
		if err != nil || i < 0 || i >= len(r.orig) {
			return m
		}
		return r.orig[i]
	})
}

// interpolateTree restores references in every key and interpolates every
// scalar value of the tree in place, before any value is decoded, and
// returns what happened to each node that referenced a variable. Aliases are
// not followed: the node they point at is interpolated once where it is
// defined.
func interpolateTree(root *yaml.Node, r *refs, env func(string) (string, bool)) map[*yaml.Node]interp {
	out := map[*yaml.Node]interp{}
	var walk func(n *yaml.Node, key bool, depth int)
	walk = func(n *yaml.Node, key bool, depth int) {
		if n == nil || depth > maxDepth {
			return
		}
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, false, depth+1)
			}
		case yaml.MappingNode:
			for i, c := range n.Content {
				walk(c, i%2 == 0, depth+1)
			}
		case yaml.ScalarNode:
			n.Value = r.restore(n.Value)
			if key || !strings.Contains(n.Value, "${") {
				return
			}
			v, in := interpolate(n.Value, env)
			n.Value = v
			if in.vars != nil || in.err != "" {
				out[n] = in
			}
		}
	}
	walk(root, false, 0)
	return out
}
