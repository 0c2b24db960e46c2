package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// pgSource is one sync's PostgreSQL table (schema src of a scenario's own
// database), read by keyset on updated_at: a row changed in place moves
// updated_at, so the next run reads its current value, as in production.
// Every change is one autocommitted statement from this one writer, in
// sequence, so commits happen in updated_at order and a keyset reader never
// skips one.
type pgSource struct {
	id     string
	wmode  string
	dsn    string // the table's database (also the config's dsn)
	name   string // unquoted schema.table, for the config
	table  string // quoted
	mapExt bool
	pool   *pgxpool.Pool
	// timeout, when set, is the config's source.timeout ("5s").
	timeout string

	mu      sync.Mutex
	n       int
	resync  bool // a statement failed: n may be behind the table (its commit may have made it)
	step    int
	changed map[int]int // identity -> step it was changed at
	flipped map[int]bool
}

// newPGSource creates table src.<name> in the database of dsn with rows
// records; the pool is closed when the scenario ends.
func (e *env) newPGSource(ctx context.Context, dsn, syncID, name, mode string, rows int) (*pgSource, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("source table %s: %w", name, err)
	}
	e.onClose(pool.Close)
	s := &pgSource{id: syncID, wmode: mode, dsn: dsn, name: "src." + name, table: pgx.Identifier{"src", name}.Sanitize(),
		mapExt: mode == "single", pool: pool, changed: map[int]int{}, flipped: map[int]bool{}}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS src; CREATE TABLE `+s.table+` (id bigint PRIMARY KEY,
		email text NOT NULL, first_name text, ext_id text NOT NULL,
		updated_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return nil, fmt.Errorf("create the source table %s: %w", s.name, err)
	}
	return s, s.grow(ctx, rows)
}

// newPGSourceDB is newPGSource of table src.contacts for a single-path
// sync, in a database of its own on the scenario's PostgreSQL server (the
// store's too: its URL is dbURL).
func (e *env) newPGSourceDB(ctx context.Context, syncID string, rows int) (dbURL string, src *pgSource, err error) {
	if err := needPG(ctx, e); err != nil {
		return "", nil, err
	}
	if dbURL, err = e.createDatabase(ctx, e.o.DBURL); err != nil {
		return "", nil, err
	}
	src, err = e.newPGSource(ctx, dbURL, syncID, "contacts", "single", rows)
	return dbURL, src, err
}

func (s *pgSource) syncID() string { return s.id }
func (s *pgSource) mode() string   { return s.wmode }

func (s *pgSource) email(i int) string { return fmt.Sprintf("%s-%07d@example.com", s.id, i) }

func (s *pgSource) yaml(pageSize int) string {
	ext := ""
	if s.mapExt {
		ext = "ext_id: ext_id, "
	}
	timeout := ""
	if s.timeout != "" {
		timeout = ", timeout: " + s.timeout
	}
	return fmt.Sprintf(`    source: {type: postgres, dsn: %q, table: %s, cursor_column: updated_at, identity: id, page_size: %d%s}
    mapping: {email: email, %sattributes: {FIRSTNAME: first_name}}
`, s.dsn, s.name, pageSize, timeout, ext)
}

func (s *pgSource) grow(ctx context.Context, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= 0 {
		return nil
	}
	if s.resync {
		var last int64
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+s.table).Scan(&last); err != nil {
			return fmt.Errorf("grow %s: %w", s.name, err)
		}
		s.n, s.resync = int(last), false
	}
	// One statement: the rows commit together, in id order of updated_at.
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.table+` (id, email, first_name, ext_id)
		SELECT g, $1 || '-' || lpad(g::text, 7, '0') || '@example.com', 'First' || g, $1 || '-x' || g
		FROM generate_series($2::bigint, $3::bigint) g ORDER BY g`, s.id, s.n+1, s.n+n)
	if err != nil {
		s.resync = true
		return fmt.Errorf("grow %s: %w", s.name, err)
	}
	s.n += n
	return nil
}

// flip changes back the records changed two steps ago (by then a run has
// most likely delivered the change, which is what exposes a lost update),
// changes k others, and clears one more row's first_name for good (NULL:
// the destination must then hold no value for it, docs/guide.md#a-value-cleared-in-the-source).
func (s *pgSource) flip(ctx context.Context, e *env, k int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step++
	var back []int
	for i, at := range s.changed {
		if s.step-at >= 2 {
			back = append(back, i)
		}
	}
	if err := s.setLocked(ctx, back, false); err != nil {
		return err
	}
	var fresh []int
	if s.n > 0 {
		for _, i := range pickIDs(e, 1, s.n, k) {
			if _, ok := s.changed[i]; !ok {
				fresh = append(fresh, i)
			}
		}
	}
	if err := s.setLocked(ctx, fresh, true); err != nil {
		return err
	}
	if s.n == 0 {
		return nil
	}
	i := pickIDs(e, 1, s.n, 1)[0]
	if _, ok := s.changed[i]; ok {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.table+` SET first_name = NULL, updated_at = clock_timestamp() WHERE id = $1`, i); err != nil {
		return fmt.Errorf("clear a row of %s: %w", s.name, err)
	}
	s.flipped[i] = true
	return nil
}

func (s *pgSource) unflip(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var back []int
	for i := range s.changed {
		back = append(back, i)
	}
	return s.setLocked(ctx, back, false)
}

// setLocked sets ids to Changed<i> or back to First<i>, in one statement.
func (s *pgSource) setLocked(ctx context.Context, ids []int, changed bool) error {
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	prefix := "First"
	if changed {
		prefix = "Changed"
	}
	ids64 := make([]int64, len(ids))
	for j, i := range ids {
		ids64[j] = int64(i)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.table+` SET first_name = $1 || id, updated_at = clock_timestamp() WHERE id = ANY($2)`,
		prefix, ids64); err != nil {
		return fmt.Errorf("change rows of %s: %w", s.name, err)
	}
	for _, i := range ids {
		s.flipped[i] = true
		if changed {
			s.changed[i] = s.step
		} else {
			delete(s.changed, i)
		}
	}
	return nil
}

func (s *pgSource) rows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// wants reads every row's current values from the table.
func (s *pgSource) wants(ctx context.Context) ([]want, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, email, coalesce(first_name, ''), ext_id FROM `+s.table+` ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	s.mu.Lock()
	flipped := make(map[int]bool, len(s.flipped))
	for i := range s.flipped {
		flipped[i] = true
	}
	s.mu.Unlock()
	var out []want
	for rows.Next() {
		var id int64
		var w want
		if err := rows.Scan(&id, &w.Email, &w.First, &w.ExtID); err != nil {
			return nil, err
		}
		if !s.mapExt {
			w.ExtID = ""
		}
		w.Flipped = flipped[int(id)]
		w.Label = s.id + " id " + strconv.FormatInt(id, 10)
		out = append(out, w)
	}
	return out, rows.Err()
}

func (s *pgSource) caughtUp(ctx context.Context, fake *fakebrevo.Server) bool {
	ws, err := s.wants(ctx)
	if err != nil {
		return false
	}
	for _, w := range ws {
		var v valueCounts
		if v.compare(fake, w); v.Delivered != 1 {
			return false
		}
	}
	return true
}

// check is the value checker over every row. A table that cannot be read
// counts every record it had as lost (and says so in the example list).
func (s *pgSource) check(ctx context.Context, fake *fakebrevo.Server) valueCounts {
	var v valueCounts
	ws, err := s.wants(ctx)
	if err != nil {
		n := int64(s.rows())
		v.Records, v.Lost = n, n
		v.Examples = append(v.Examples, fmt.Sprintf("%s: could not read the table: %v", s.name, err))
		return v
	}
	for _, w := range ws {
		v.compare(fake, w)
	}
	return v
}
