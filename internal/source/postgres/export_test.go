package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ExplainIdentities returns PostgreSQL's plan for the statement
// ReadIdentities runs for identity and ids, one line per plan line.
func (s *Source) ExplainIdentities(ctx context.Context, identity string, ids []string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var plan []string
	err := s.snapshot(ctx, "explain", func(tx pgx.Tx) error {
		q, err := s.refetchQuery(ctx, tx, identity)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+q.sql, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, line)
		}
		return rows.Err()
	})
	return strings.Join(plan, "\n"), err
}
