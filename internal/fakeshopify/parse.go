package fakeshopify

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The subset of GraphQL the fake reads: one operation (anonymous, or
// `query Name($v: Type, ...)`), fields with optional aliases, arguments whose
// values are variables, strings (with escapes), block strings are refused,
// ints, floats, booleans, null, enums and lists, and inline fragments
// (`... on Customer { }`). Named fragments, directives, mutations and
// subscriptions are refused with a clear error: the fake must never answer
// a document it does not understand.

type tokKind int

const (
	tEOF tokKind = iota
	tName
	tInt
	tFloat
	tString
	tPunct // one of ! $ ( ) : = @ [ ] { } | and "..."
)

type token struct {
	kind      tokKind
	text      string // the value of a string, the spelling of anything else
	line, col int
}

type lexer struct {
	src       string
	pos       int
	line, col int
}

// parseError is a GraphQL syntax error at a place in the document.
type parseError struct {
	msg       string
	line, col int
}

func (e *parseError) Error() string { return e.msg }

func (l *lexer) errf(line, col int, format string, args ...any) error {
	return &parseError{msg: fmt.Sprintf(format, args...), line: line, col: col}
}

func (l *lexer) advance(n int) {
	for range n {
		if l.src[l.pos] == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
		l.pos++
	}
}

func (l *lexer) next() (token, error) {
	// Skip whitespace, commas and comments.
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			l.advance(1)
			continue
		case c == '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.advance(1)
			}
			continue
		}
		break
	}
	if l.pos >= len(l.src) {
		return token{kind: tEOF, line: l.line, col: l.col}, nil
	}
	line, col := l.line, l.col
	c := l.src[l.pos]
	switch {
	case strings.HasPrefix(l.src[l.pos:], "..."):
		l.advance(3)
		return token{kind: tPunct, text: "...", line: line, col: col}, nil
	case strings.ContainsRune("!$():=@[]{}|", rune(c)):
		l.advance(1)
		return token{kind: tPunct, text: string(c), line: line, col: col}, nil
	case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		start := l.pos
		for l.pos < len(l.src) {
			c := l.src[l.pos]
			if c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
				l.advance(1)
				continue
			}
			break
		}
		return token{kind: tName, text: l.src[start:l.pos], line: line, col: col}, nil
	case c == '-' || c >= '0' && c <= '9':
		start := l.pos
		l.advance(1)
		float := false
		for l.pos < len(l.src) {
			c := l.src[l.pos]
			switch {
			case c >= '0' && c <= '9':
			case c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && float):
				float = true
			default:
				goto done
			}
			l.advance(1)
		}
	done:
		text := l.src[start:l.pos]
		if float {
			if _, err := strconv.ParseFloat(text, 64); err != nil {
				return token{}, l.errf(line, col, "Parse error on %q (FLOAT) at [%d, %d]", text, line, col)
			}
			return token{kind: tFloat, text: text, line: line, col: col}, nil
		}
		if _, err := strconv.ParseInt(text, 10, 64); err != nil {
			return token{}, l.errf(line, col, "Parse error on %q (INT) at [%d, %d]", text, line, col)
		}
		return token{kind: tInt, text: text, line: line, col: col}, nil
	case c == '"':
		if strings.HasPrefix(l.src[l.pos:], `"""`) {
			return token{}, l.errf(line, col, "block strings are not supported by this fake Shopify (at [%d, %d])", line, col)
		}
		l.advance(1)
		var b strings.Builder
		for {
			if l.pos >= len(l.src) || l.src[l.pos] == '\n' {
				return token{}, l.errf(line, col, "Parse error on unterminated string at [%d, %d]", line, col)
			}
			c := l.src[l.pos]
			if c == '"' {
				l.advance(1)
				return token{kind: tString, text: b.String(), line: line, col: col}, nil
			}
			if c != '\\' {
				r, size := utf8.DecodeRuneInString(l.src[l.pos:])
				b.WriteRune(r)
				l.pos += size
				l.col++
				continue
			}
			if l.pos+1 >= len(l.src) {
				return token{}, l.errf(line, col, "Parse error on unterminated string at [%d, %d]", line, col)
			}
			e := l.src[l.pos+1]
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				if l.pos+6 > len(l.src) {
					return token{}, l.errf(line, col, "Parse error on bad unicode escape at [%d, %d]", line, col)
				}
				n, err := strconv.ParseUint(l.src[l.pos+2:l.pos+6], 16, 32)
				if err != nil {
					return token{}, l.errf(line, col, "Parse error on bad unicode escape at [%d, %d]", line, col)
				}
				b.WriteRune(rune(n))
				l.advance(4)
			default:
				return token{}, l.errf(line, col, "Parse error on bad escape \\%c at [%d, %d]", e, line, col)
			}
			l.advance(2)
		}
	}
	return token{}, l.errf(line, col, "Parse error on %q at [%d, %d]", string(c), line, col)
}

// value is an argument's value: exactly one of its fields is set.
type value struct {
	Var    string  // $name
	Str    *string // "..."
	Int    *int64
	Float  *float64
	Bool   *bool
	Enum   string
	Null   bool
	List   []value
	IsList bool
}

type argument struct {
	Name      string
	Value     value
	Line, Col int
}

// field is one selection: a field, or an inline fragment (On set).
type field struct {
	Alias, Name string
	Args        []argument
	Sel         []field
	HasSel      bool
	On          string // inline fragment's type condition
	Line, Col   int
}

// key is the field's name in the response.
func (f field) key() string {
	if f.Alias != "" {
		return f.Alias
	}
	return f.Name
}

type varDef struct {
	Name, Type string
	Default    *value
}

type document struct {
	Vars []varDef
	Sel  []field
}

type parser struct {
	lx  lexer
	tok token
}

func parseDocument(src string) (*document, error) {
	p := &parser{lx: lexer{src: src, line: 1, col: 1}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	doc := &document{}
	switch {
	case p.tok.kind == tPunct && p.tok.text == "{":
	case p.tok.kind == tName && p.tok.text == "query":
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tName {
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		if p.is("(") {
			vars, err := p.varDefs()
			if err != nil {
				return nil, err
			}
			doc.Vars = vars
		}
	case p.tok.kind == tName && (p.tok.text == "mutation" || p.tok.text == "subscription" || p.tok.text == "fragment"):
		return nil, p.unsupported(p.tok.text + " operations")
	default:
		return nil, p.unexpected()
	}
	if p.is("@") {
		return nil, p.unsupported("directives")
	}
	sel, err := p.selectionSet()
	if err != nil {
		return nil, err
	}
	doc.Sel = sel
	if p.tok.kind != tEOF {
		if p.tok.kind == tName && (p.tok.text == "query" || p.tok.text == "fragment" || p.tok.text == "mutation") {
			return nil, p.unsupported("documents of several definitions")
		}
		return nil, p.unexpected()
	}
	return doc, nil
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) is(punct string) bool { return p.tok.kind == tPunct && p.tok.text == punct }

func (p *parser) unexpected() error {
	name := map[tokKind]string{tEOF: "end of file", tName: "IDENTIFIER", tInt: "INT", tFloat: "FLOAT", tString: "STRING", tPunct: "PUNCTUATION"}[p.tok.kind]
	return &parseError{msg: fmt.Sprintf("Parse error on %q (%s) at [%d, %d]", p.tok.text, name, p.tok.line, p.tok.col), line: p.tok.line, col: p.tok.col}
}

func (p *parser) unsupported(what string) error {
	return &parseError{msg: fmt.Sprintf("this fake Shopify does not support %s (at [%d, %d]); it reads the subset of GraphQL oncesync sends", what, p.tok.line, p.tok.col), line: p.tok.line, col: p.tok.col}
}

func (p *parser) expect(punct string) error {
	if !p.is(punct) {
		return p.unexpected()
	}
	return p.advance()
}

func (p *parser) name() (string, error) {
	if p.tok.kind != tName {
		return "", p.unexpected()
	}
	n := p.tok.text
	return n, p.advance()
}

func (p *parser) varDefs() ([]varDef, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []varDef
	for !p.is(")") {
		if err := p.expect("$"); err != nil {
			return nil, err
		}
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		if err := p.expect(":"); err != nil {
			return nil, err
		}
		typ, err := p.typeRef()
		if err != nil {
			return nil, err
		}
		d := varDef{Name: n, Type: typ}
		if p.is("=") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			d.Default = &v
		}
		out = append(out, d)
	}
	return out, p.advance()
}

func (p *parser) typeRef() (string, error) {
	var t string
	if p.is("[") {
		if err := p.advance(); err != nil {
			return "", err
		}
		inner, err := p.typeRef()
		if err != nil {
			return "", err
		}
		if err := p.expect("]"); err != nil {
			return "", err
		}
		t = "[" + inner + "]"
	} else {
		n, err := p.name()
		if err != nil {
			return "", err
		}
		t = n
	}
	if p.is("!") {
		t += "!"
		return t, p.advance()
	}
	return t, nil
}

func (p *parser) selectionSet() ([]field, error) {
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	var out []field
	for !p.is("}") {
		if p.tok.kind == tEOF {
			return nil, p.unexpected()
		}
		f, err := p.selection()
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, p.unexpected()
	}
	return out, p.advance()
}

func (p *parser) selection() (field, error) {
	f := field{Line: p.tok.line, Col: p.tok.col}
	if p.is("...") {
		if err := p.advance(); err != nil {
			return f, err
		}
		if p.tok.kind != tName || p.tok.text != "on" {
			return f, p.unsupported("named fragments")
		}
		if err := p.advance(); err != nil {
			return f, err
		}
		on, err := p.name()
		if err != nil {
			return f, err
		}
		f.On = on
		if p.is("@") {
			return f, p.unsupported("directives")
		}
		sel, err := p.selectionSet()
		f.Sel, f.HasSel = sel, true
		return f, err
	}
	n, err := p.name()
	if err != nil {
		return f, err
	}
	f.Name = n
	if p.is(":") {
		if err := p.advance(); err != nil {
			return f, err
		}
		if f.Name, err = p.name(); err != nil {
			return f, err
		}
		f.Alias = n
	}
	if p.is("(") {
		if err := p.advance(); err != nil {
			return f, err
		}
		for !p.is(")") {
			a := argument{Line: p.tok.line, Col: p.tok.col}
			if a.Name, err = p.name(); err != nil {
				return f, err
			}
			if err := p.expect(":"); err != nil {
				return f, err
			}
			if a.Value, err = p.value(); err != nil {
				return f, err
			}
			f.Args = append(f.Args, a)
		}
		if err := p.advance(); err != nil {
			return f, err
		}
	}
	if p.is("@") {
		return f, p.unsupported("directives")
	}
	if p.is("{") {
		sel, err := p.selectionSet()
		if err != nil {
			return f, err
		}
		f.Sel, f.HasSel = sel, true
	}
	return f, nil
}

func (p *parser) value() (value, error) {
	t := p.tok
	var v value
	switch t.kind {
	case tPunct:
		switch t.text {
		case "$":
			if err := p.advance(); err != nil {
				return v, err
			}
			n, err := p.name()
			v.Var = n
			return v, err
		case "[":
			if err := p.advance(); err != nil {
				return v, err
			}
			v.IsList = true
			for !p.is("]") {
				if p.tok.kind == tEOF {
					return v, p.unexpected()
				}
				e, err := p.value()
				if err != nil {
					return v, err
				}
				v.List = append(v.List, e)
			}
			return v, p.advance()
		case "{":
			return v, p.unsupported("input object literals")
		}
		return v, p.unexpected()
	case tString:
		s := t.text
		v.Str = &s
	case tInt:
		n, _ := strconv.ParseInt(t.text, 10, 64)
		v.Int = &n
	case tFloat:
		f, _ := strconv.ParseFloat(t.text, 64)
		v.Float = &f
	case tName:
		switch t.text {
		case "true", "false":
			b := t.text == "true"
			v.Bool = &b
		case "null":
			v.Null = true
		default:
			v.Enum = t.text
		}
	default:
		return v, p.unexpected()
	}
	return v, p.advance()
}
