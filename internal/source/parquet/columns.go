package parquet

import (
	"fmt"

	pq "github.com/parquet-go/parquet-go"
)

// columns maps a file's rows to records: the top-level fields by name.
type columns struct {
	schema *pq.Schema
	// leaves are the leaf columns by index: the top-level field each belongs
	// to and, for a top-level leaf that is not repeated, its conversion.
	leaves []leaf
	// nested are the top-level fields that are groups or repeated, which
	// parquet-go reconstructs (nil when there are none: the fast path).
	nested []string
	// fields is the number of top-level fields (a record's map size).
	fields int
}

type leaf struct {
	name    string
	convert convertFunc // nil for a column of a nested field
}

func newColumns(schema *pq.Schema) *columns {
	c := &columns{schema: schema}
	for _, f := range schema.Fields() {
		c.fields++
		if f.Leaf() && !f.Repeated() {
			c.leaves = append(c.leaves, leaf{name: f.Name(), convert: converter(f.Type())})
			continue
		}
		c.nested = append(c.nested, f.Name())
		for range leafCount(f) {
			c.leaves = append(c.leaves, leaf{name: f.Name()})
		}
	}
	return c
}

func leafCount(n pq.Node) int {
	if n.Leaf() {
		return 1
	}
	k := 0
	for _, f := range n.Fields() {
		k += leafCount(f)
	}
	return k
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

// record decodes one row.
func (c *columns) record(r pq.Row) (map[string]any, error) {
	fields := make(map[string]any, c.fields)
	for _, v := range r {
		col := v.Column()
		if col < 0 || col >= len(c.leaves) {
			return nil, fmt.Errorf("value of column %d, the schema has %d", col, len(c.leaves))
		}
		l := c.leaves[col]
		if l.convert == nil {
			continue
		}
		if v.IsNull() {
			fields[l.name] = nil
		} else {
			fields[l.name] = l.convert(v)
		}
	}
	if len(c.nested) > 0 {
		m := map[string]any{}
		if err := c.schema.Reconstruct(&m, r); err != nil {
			return nil, fmt.Errorf("nested columns: %w", err)
		}
		for _, name := range c.nested {
			fields[name] = normalize(m[name])
		}
	}
	return fields, nil
}
