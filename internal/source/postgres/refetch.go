package postgres

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncesync/oncesync/internal/source"
)

// identityChunk bounds the ids bound to one statement, so a long list of
// rejected rows costs a few statements of bounded size, not one huge one.
const identityChunk = 1000

var _ source.Refetcher = (*Source)(nil)

// refetchQuery is how the rows of one identity column are read by value.
type refetchQuery struct {
	// sql reads the source's rows whose identity is one of $1.
	sql string
	// typ is the column's type as format_type prints it (quoted, qualified
	// when not on the search_path), for casting ids.
	typ string
	// oid is the column's type in results; idx its position.
	oid uint32
	idx int
}

// ReadIdentities re-reads the rows of the source (its table, or its query)
// whose column identity renders as one of ids (as mapping.Identity renders
// a Field: fmt.Sprint of the value ReadPage returns), in one REPEATABLE READ,
// READ ONLY snapshot. Records are built exactly as ReadPage builds them. An
// id matches a row only when it is exactly the row's rendering: ids that are
// not a value of the column's type, or not in PostgreSQL's canonical form
// ("042" for an integer), match nothing, as do ids of deleted rows. Each row
// comes at most once, in no particular order.
//
// The ids are bound as an array of the column's own type (looked up in the
// snapshot), so a table's index on identity is used and a query source lets
// PostgreSQL push the condition down. Lists longer than 1,000 ids are read in
// several statements of the same snapshot. Errors are classified as
// ReadPage's are and never quote an id.
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
	err := s.snapshot(ctx, "read identities", func(tx pgx.Tx) error {
		q, err := s.refetchQuery(ctx, tx, identity)
		if err != nil {
			return err
		}
		params := inputTexts(q.oid, ids)
		for start := 0; start < len(params); start += identityChunk {
			chunk := params[start:min(start+identityChunk, len(params))]
			if out, err = q.read(ctx, tx, chunk, out); err != nil {
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

// refetchQuery looks up identity's type in the source's result (a LIMIT 0
// read, as New's check) and builds the statement reading rows by it.
func (s *Source) refetchQuery(ctx context.Context, tx pgx.Tx, identity string) (refetchQuery, error) {
	rows, err := tx.Query(ctx, "SELECT * FROM "+s.from+" AS src LIMIT 0")
	if err != nil {
		return refetchQuery{}, err
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return refetchQuery{}, err
	}
	fds := rows.FieldDescriptions()
	seen, err := fieldIndex(fds)
	if err != nil {
		return refetchQuery{}, err
	}
	idx, ok := seen[identity]
	if !ok {
		return refetchQuery{}, fmt.Errorf("the result has no identity column %q: %w", identity, source.ErrInvalid)
	}
	q := refetchQuery{oid: fds[idx].DataTypeOID, idx: idx}
	// Without a typmod: a varchar(10) cast would truncate a longer id
	// into another row's value.
	if err := tx.QueryRow(ctx, "SELECT format_type($1::oid, NULL)", strconv.FormatUint(uint64(q.oid), 10)).Scan(&q.typ); err != nil {
		return refetchQuery{}, err
	}
	q.sql = "SELECT * FROM " + s.from + " AS src WHERE " + col(identity) + " = ANY($1::" + q.typ + "[])"
	return q, nil
}

// idParam is an id and the text PostgreSQL's input function reads for it.
type idParam struct {
	id, text string
	// checked reports that text is known to be valid input for the type
	// (see inputTexts); otherwise the server is asked.
	checked bool
}

// inputTexts returns the distinct ids that can render a value of type oid,
// with their input text. For the usual identity types the check is exact
// (only PostgreSQL's canonical output passes); for the others every id
// without a NUL byte passes, to be checked by the server's input function.
func inputTexts(oid uint32, ids []string) []idParam {
	out := make([]idParam, 0, len(ids))
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if p, ok := inputText(oid, id); ok {
			out = append(out, p)
		}
	}
	return out
}

func inputText(oid uint32, id string) (idParam, bool) {
	// PostgreSQL's text never holds NUL, and a NUL cannot be sent.
	if strings.IndexByte(id, 0) >= 0 {
		return idParam{}, false
	}
	p := idParam{id: id, text: id, checked: true}
	switch oid {
	case pgtype.Int2OID:
		return p, canonicalInt(id, 16)
	case pgtype.Int4OID:
		return p, canonicalInt(id, 32)
	case pgtype.Int8OID:
		return p, canonicalInt(id, 64)
	case pgtype.OIDOID:
		n, err := strconv.ParseUint(id, 10, 32)
		return p, err == nil && strconv.FormatUint(n, 10) == id
	case pgtype.BoolOID:
		return p, id == "true" || id == "false"
	case pgtype.UUIDOID:
		return p, canonicalUUID(id)
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID:
		return p, utf8.ValidString(id)
	case pgtype.ByteaOID:
		// Rendered as base64 (see convert); read back in hex format.
		b, err := base64.StdEncoding.DecodeString(id)
		if err != nil {
			return idParam{}, false
		}
		p.text = `\x` + hex.EncodeToString(b)
		return p, true
	}
	p.checked = false
	return p, true
}

// canonicalInt reports whether s is an integer of bits bits as PostgreSQL
// prints it (no sign but "-", no leading zeros or spaces).
func canonicalInt(s string, bits int) bool {
	n, err := strconv.ParseInt(s, 10, bits)
	return err == nil && strconv.FormatInt(n, 10) == s
}

// canonicalUUID reports whether s is a UUID as PostgreSQL prints it
// (lowercase, hyphenated 8-4-4-4-12).
func canonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// read appends to out the rows matching chunk's ids.
func (q refetchQuery) read(ctx context.Context, tx pgx.Tx, chunk []idParam, out []source.Record) ([]source.Record, error) {
	var unchecked []idParam
	texts := make([]string, 0, len(chunk))
	want := make(map[string]struct{}, len(chunk))
	for _, p := range chunk {
		if !p.checked {
			unchecked = append(unchecked, p)
			continue
		}
		texts = append(texts, p.text)
		want[p.id] = struct{}{}
	}
	valid, err := q.valid(ctx, tx, unchecked)
	if err != nil {
		return nil, err
	}
	for _, p := range valid {
		texts = append(texts, p.text)
		want[p.id] = struct{}{}
	}
	if len(texts) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, q.sql, texts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// The lookup's lock on the relation holds until the snapshot ends, so
	// the columns are still the ones looked up.
	fds := rows.FieldDescriptions()
	for rows.Next() {
		raw := rows.RawValues()
		// Only the exact rendering counts: a cast also reads non-canonical
		// forms (" 42", "12.5" for 12.50) that are no row's identity.
		if _, ok := want[fmt.Sprint(convert(q.oid, raw[q.idx]))]; !ok {
			continue
		}
		out = append(out, record(fds, raw))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// valid returns the ids of ps that the column type's input function accepts.
// One bad id fails the whole array's cast, so a failing list is halved until
// the bad ids are alone; each try runs under a savepoint, as a failed
// statement would abort the snapshot's transaction. The cast touches no
// data, so its data errors can only be the ids'.
func (q refetchQuery) valid(ctx context.Context, tx pgx.Tx, ps []idParam) ([]idParam, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	texts := make([]string, len(ps))
	for i, p := range ps {
		texts[i] = p.text
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	_, err = sp.Exec(ctx, "SELECT $1::"+q.typ+"[]", texts)
	if err == nil {
		return ps, sp.Commit(ctx)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "22") {
		return nil, err
	}
	if err := sp.Rollback(ctx); err != nil {
		return nil, err
	}
	if len(ps) == 1 {
		return nil, nil
	}
	half := len(ps) / 2
	a, err := q.valid(ctx, tx, ps[:half])
	if err != nil {
		return nil, err
	}
	b, err := q.valid(ctx, tx, ps[half:])
	if err != nil {
		return nil, err
	}
	return append(a, b...), nil
}
