package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/source"
)

// identityChunk bounds the ids written into one statement, so a long list of
// rejected rows costs a few statements of bounded size, not one huge one.
const identityChunk = 1000

var _ source.Refetcher = (*Source)(nil)

// ReadIdentities re-reads the rows of the source (its table, or its query)
// whose column identity renders as one of ids (as mapping.Identity renders
// a Field: fmt.Sprint of the value ReadPage returns), in one consistent
// snapshot. Records are built exactly as ReadPage builds them. An id matches
// a row only when it is exactly the row's rendering: ids that are not a
// value of the column's type, or not in MySQL's canonical form ("042" for an
// integer), match nothing, as do ids of deleted rows and ids equal to a
// row's only in a case-insensitive collation. Each row comes at most once,
// in no particular order.
//
// The ids are written as literals of the column's type (looked up in the
// snapshot), so a table's index on identity is used. Lists longer than 1,000
// ids are read in several statements of the same snapshot. Errors are
// classified as ReadPage's are and never quote an id.
func (s *Source) ReadIdentities(ctx context.Context, identity string, ids []string) ([]source.Record, error) {
	if identity == "" {
		return nil, fmt.Errorf("%s: read identities: no identity column: %w", s.id, source.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []source.Record
	err := s.snapshot(ctx, "read identities", func(conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, "SELECT "+s.columns+" FROM "+s.from+" AS `src` LIMIT 0")
		if err != nil {
			return err
		}
		r, err := s.columnsOf(rows)
		rows.Close()
		if err != nil {
			return err
		}
		seen, err := r.fieldIndex()
		if err != nil {
			return err
		}
		idx, ok := seen[identity]
		if !ok {
			return fmt.Errorf("the result has no identity column %q: %w", identity, source.ErrInvalid)
		}
		k := r.kinds[idx]
		want := make(map[string]struct{}, len(ids))
		lits := make([]string, 0, len(ids))
		for _, id := range ids {
			if _, dup := want[id]; dup {
				continue
			}
			if lit, ok := idLiteral(k, id); ok {
				want[id] = struct{}{}
				lits = append(lits, lit)
			}
		}
		for start := 0; start < len(lits); start += identityChunk {
			chunk := lits[start:min(start+identityChunk, len(lits))]
			if out, err = s.readIDs(ctx, conn, identity, idx, chunk, want, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// idLiteral is the literal of an id of a column of kind k. Ids render a
// record's value (see convert), so binary ones are base64 and DATETIME ones
// RFC 3339; the literal is of MySQL's form of the value.
func idLiteral(k kind, id string) (string, bool) {
	if strings.IndexByte(id, 0) >= 0 && k != kindBinary {
		return "", false
	}
	switch k {
	case kindDatetime:
		id = strings.Replace(id, "T", " ", 1)
	case kindTimestamp:
		id = strings.Replace(strings.TrimSuffix(id, "Z"), "T", " ", 1)
	case kindFloat, kindJSON:
		// Never exact; the rendering check below decides.
		return strLiteral(id), utf8.ValidString(id)
	}
	return literal(k, id)
}

// readIDs appends to out the rows whose identity is one of lits and renders
// as one of want.
func (s *Source) readIDs(ctx context.Context, conn *sql.Conn, identity string, idx int, lits []string,
	want map[string]struct{}, out []source.Record) ([]source.Record, error) {
	rows, err := conn.QueryContext(ctx, "SELECT "+s.columns+" FROM "+s.from+" AS `src` WHERE "+col(identity)+" IN ("+strings.Join(lits, ", ")+")")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	r, err := s.columnsOf(rows)
	if err != nil {
		return nil, err
	}
	sc := newScanner(len(r.names))
	for rows.Next() {
		if err := sc.scan(rows); err != nil {
			return nil, err
		}
		// Only the exact rendering counts: a comparison also matches forms
		// that are no row's identity (" 42", 'ADA@x' in a _ci collation).
		if _, ok := want[fmt.Sprint(convert(r.kinds[idx], sc.vals[idx]))]; !ok {
			continue
		}
		rec, err := s.record(r, sc.vals)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
