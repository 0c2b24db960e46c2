package parquet

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// columns maps a file's rows to records: the top-level fields by name.
type columns struct {
	// fields are the top-level fields, in the order of their leaf columns.
	fields []field
	// leaves is the number of leaf columns.
	leaves int
	// nested says whether a field is a group or repeated (the slow path).
	nested bool
	// parts are the partition columns of the file's directories that the
	// file does not hold itself.
	parts []partition
}

// partition is a column named by a directory: dt=2026-12-01. value is
// any so Hive's null partition is nil.
type partition struct {
	name  string
	value any
}

// field is one top-level field: its leaf columns start at first.
type field struct {
	name  string
	first int
	shape *shape
}

// shapeKind is how a node's value is assembled from its leaf columns.
type shapeKind int

const (
	leafShape  shapeKind = iota
	groupShape           // a JSON object of the fields
	wrapShape            // a group of one field standing for it (a LIST's element wrapper)
	listShape            // a LIST: its one field, repeated, is the array
	mapShape             // a MAP: its one field, repeated key and value, is the object
)

// shape is a node of a file's schema, decoded once per file so every leaf
// converts as a top-level column of its type does, wherever it sits
// (docs/config.md#parquet-source).
type shape struct {
	kind               shapeKind
	optional, repeated bool
	convert            convertFunc // leafShape
	names              []string    // groupShape
	fields             []*shape    // groupShape, wrapShape, listShape, mapShape
	// leaves is the number of leaf columns under the node.
	leaves int
	// key and value are the fields of a mapShape's entry group.
	key, value int
}

func newColumns(schema *pq.Schema, parts []partition) *columns {
	c := &columns{}
	have := map[string]bool{}
	for _, f := range schema.Fields() {
		s := newShape(f.Name(), f)
		c.fields = append(c.fields, field{name: f.Name(), first: c.leaves, shape: s})
		c.leaves += s.leaves
		if s.kind != leafShape || s.repeated {
			c.nested = true
		}
		have[f.Name()] = true
	}
	// A column in the file wins over its directory's (a writer that kept it).
	for _, p := range parts {
		if !have[p.name] {
			have[p.name] = true
			c.parts = append(c.parts, p)
		}
	}
	return c
}

func newShape(name string, n pq.Node) *shape {
	s := &shape{optional: n.Optional(), repeated: n.Repeated()}
	if n.Leaf() {
		s.kind, s.convert, s.leaves = leafShape, converter(n.Type()), 1
		return s
	}
	fields := n.Fields()
	for _, f := range fields {
		c := newShape(f.Name(), f)
		s.fields = append(s.fields, c)
		s.names = append(s.names, f.Name())
		s.leaves += c.leaves
	}
	s.kind = groupShape
	var lt *format.LogicalType
	if t := n.Type(); t != nil {
		lt = t.LogicalType()
	}
	if lt == nil || len(fields) != 1 || !fields[0].Repeated() {
		return s
	}
	inner := s.fields[0]
	switch lt.Value.(type) {
	case *format.ListType:
		s.kind = listShape
		// The element is the repeated field's one field, unless the file
		// is of a writer that repeats the element itself (a leaf, a group
		// of several fields, or a one-field group named "array" or
		// "<list>_tuple"): the backward-compatibility rules of Parquet's
		// LogicalTypes.md.
		rname := fields[0].Name()
		if inner.kind != leafShape && len(inner.fields) == 1 && rname != "array" && rname != name+"_tuple" {
			inner.kind = wrapShape
		}
	case *format.MapType:
		if inner.kind == groupShape && len(inner.fields) == 2 {
			s.kind = mapShape
			s.key, s.value = slicesIndex(inner.names, "key", 0), slicesIndex(inner.names, "value", 1)
			if s.key == s.value {
				s.key, s.value = 0, 1
			}
		}
	}
	return s
}

func slicesIndex(names []string, name string, dflt int) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return dflt
}

// rowSize is what a row's values weigh: their bytes, 8 for a number, 1 for
// a boolean or a null (a bound on the record the destination receives, not
// its exact size).
func rowSize(r pq.Row) int64 {
	var n int64
	for _, v := range r {
		switch v.Kind() {
		case pq.ByteArray, pq.FixedLenByteArray:
			n += int64(len(v.ByteArray()))
		case pq.Int96:
			n += 12
		case pq.Boolean:
			n++
		default:
			n += 8
		}
	}
	return n
}

// errLevels is a row whose levels do not fit its schema.
var errLevels = errors.New("the repetition and definition levels do not match the schema")

// record decodes one row.
func (c *columns) record(r pq.Row) (map[string]any, error) {
	fields := make(map[string]any, len(c.fields)+len(c.parts))
	for _, p := range c.parts {
		fields[p.name] = p.value
	}
	if !c.nested {
		if len(r) != c.leaves {
			return nil, fmt.Errorf("%d values, the schema has %d columns", len(r), c.leaves)
		}
		for i, f := range c.fields {
			v := r[i]
			if v.Column() != i {
				return nil, fmt.Errorf("value of column %d in the place of column %d", v.Column(), i)
			}
			if v.IsNull() {
				fields[f.name] = nil
			} else {
				fields[f.name] = f.shape.convert(v)
			}
		}
		return fields, nil
	}
	// A row holds each column's values in column order: cut it into one
	// slice per column.
	cols := make([][]pq.Value, c.leaves)
	start := 0
	for i := 1; i <= len(r); i++ {
		if i < len(r) && r[i].Column() == r[start].Column() {
			continue
		}
		col := r[start].Column()
		if col < 0 || col >= c.leaves || cols[col] != nil {
			return nil, fmt.Errorf("value of column %d, the schema has %d", col, c.leaves)
		}
		cols[col] = r[start:i]
		start = i
	}
	for col := range cols {
		if len(cols[col]) == 0 {
			return nil, fmt.Errorf("no value of column %d", col)
		}
	}
	for _, f := range c.fields {
		v, err := f.shape.decode(cols[f.first:f.first+f.shape.leaves], 0, 0)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.name, err)
		}
		fields[f.name] = v
	}
	return fields, nil
}

// decode assembles the node's value from its columns' values in one place
// of its parent (Dremel's record assembly); def and rep are the parent's
// levels.
func (s *shape) decode(cols [][]pq.Value, def, rep int) (any, error) {
	if s.repeated {
		def, rep = def+1, rep+1
		if cols[0][0].DefinitionLevel() < def {
			return []any{}, nil
		}
		// Each column's values of one element start at a repetition level
		// of at most this node's.
		n := -1
		parts := make([][][]pq.Value, len(cols))
		for i, vs := range cols {
			from := 0
			for j := 1; j <= len(vs); j++ {
				if j == len(vs) || vs[j].RepetitionLevel() <= rep {
					parts[i] = append(parts[i], vs[from:j])
					from = j
				}
			}
			if n >= 0 && len(parts[i]) != n {
				return nil, errLevels
			}
			n = len(parts[i])
		}
		out := make([]any, n)
		one := make([][]pq.Value, len(cols))
		for k := range n {
			for i := range parts {
				one[i] = parts[i][k]
			}
			v, err := s.decodeOne(one, def, rep)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	if s.optional {
		def++
		if cols[0][0].DefinitionLevel() < def {
			return nil, nil
		}
	}
	return s.decodeOne(cols, def, rep)
}

// decodeOne is decode of a node present in this place.
func (s *shape) decodeOne(cols [][]pq.Value, def, rep int) (any, error) {
	switch s.kind {
	case leafShape:
		if len(cols[0]) != 1 {
			return nil, errLevels
		}
		v := cols[0][0]
		if v.IsNull() {
			return nil, nil
		}
		return s.convert(v), nil
	case wrapShape, listShape:
		return s.fields[0].decode(cols, def, rep)
	case mapShape:
		entries, err := s.fields[0].decode(cols, def, rep)
		if err != nil {
			return nil, err
		}
		kv := s.fields[0]
		out := make(map[string]any, len(entries.([]any)))
		for _, e := range entries.([]any) {
			m := e.(map[string]any)
			out[mapKey(m[kv.names[s.key]])] = m[kv.names[s.value]]
		}
		return out, nil
	default:
		out := make(map[string]any, len(s.fields))
		at := 0
		for i, f := range s.fields {
			v, err := f.decode(cols[at:at+f.leaves], def, rep)
			if err != nil {
				return nil, err
			}
			out[s.names[i]] = v
			at += f.leaves
		}
		return out, nil
	}
}

// mapKey is a MAP's key as a JSON object's: text as it is, other values as
// they print in JSON.
func mapKey(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case nil:
		return "null"
	case json.Number:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}
