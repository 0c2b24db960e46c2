// Package mapping turns a source record into the record a destination gets.
package mapping

import (
	"fmt"
	"sort"

	"github.com/oncesync/oncesync/internal/source"
)

// Spec is a sync's mapping. Values are source column names.
//
// With Fields set, the output is a flat object {field: value}. With Email,
// ExtID or Attributes set, it is Brevo's contact shape {"email": ...,
// "ext_id": ..., "attributes": {...}}. An empty Spec passes every column
// through unchanged.
type Spec struct {
	Email      string
	ExtID      string
	Attributes map[string]string
	Fields     map[string]string
}

// MissingColumnError reports a mapped column that the source record lacks.
type MissingColumnError struct {
	Column string
	// Identity: the column is the sync's identity, not a mapped one.
	Identity bool
	// Null: the record has the identity column, without a value.
	Null bool
}

func (e *MissingColumnError) Error() string {
	if e.Null {
		return fmt.Sprintf("the identity column %q is null or empty in this record: a record without an identity cannot be told from the others", e.Column)
	}
	if e.Identity {
		return fmt.Sprintf("the identity column %q is not in the source (every record needs it: a CSV header column, a JSON line's key, a column in every Parquet file)", e.Column)
	}
	// A JSON line may leave a key out where its exporter had no value: the
	// record is refused rather than read as null, since a misspelt column
	// read as null would clear that field at the destination for every
	// record (docs/guide.md#sources).
	return fmt.Sprintf("the mapping names column %q, which the source does not have (every record needs it: a CSV header column, a JSON line's key, a column in every Parquet file; null for no value)", e.Column)
}

// Apply maps rec.
func (s Spec) Apply(rec source.Record) (map[string]any, error) {
	get := func(col string) (any, error) {
		v, ok := rec.Fields[col]
		if !ok {
			return nil, &MissingColumnError{Column: col}
		}
		return v, nil
	}
	if len(s.Fields) > 0 {
		out := make(map[string]any, len(s.Fields))
		for _, f := range sortedKeys(s.Fields) {
			v, err := get(s.Fields[f])
			if err != nil {
				return nil, err
			}
			out[f] = v
		}
		return out, nil
	}
	if s.Email == "" && s.ExtID == "" && len(s.Attributes) == 0 {
		out := make(map[string]any, len(rec.Fields))
		for k, v := range rec.Fields {
			out[k] = v
		}
		return out, nil
	}
	out := make(map[string]any, 3)
	if s.Email != "" {
		v, err := get(s.Email)
		if err != nil {
			return nil, err
		}
		out["email"] = v
	}
	if s.ExtID != "" {
		v, err := get(s.ExtID)
		if err != nil {
			return nil, err
		}
		if v != nil {
			v = fmt.Sprint(v)
		}
		// A NULL stays null: the destination then sends no identifier
		// (fmt.Sprint made it the text "<nil>", one ext_id that every
		// such row shared at Brevo).
		out["ext_id"] = v
	}
	if len(s.Attributes) > 0 {
		attrs := make(map[string]any, len(s.Attributes))
		for _, a := range sortedKeys(s.Attributes) {
			v, err := get(s.Attributes[a])
			if err != nil {
				return nil, err
			}
			attrs[a] = v
		}
		out["attributes"] = attrs
	}
	return out, nil
}

// Identity returns the record's identity column value as a string.
func Identity(rec source.Record, column string) (string, error) {
	v, ok := rec.Fields[column]
	if !ok || v == nil {
		return "", &MissingColumnError{Column: column, Identity: true, Null: ok}
	}
	return fmt.Sprint(v), nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
