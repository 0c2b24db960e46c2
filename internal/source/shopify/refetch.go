package shopify

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncesync/oncesync/internal/source"
)

const nodesQuery = `query OncesyncCustomersByID($ids: [ID!]!) {
  nodes(ids: $ids) { ... on Customer { ` + customerFields + ` } }
}`

// ReadIdentities re-reads customers by id (nodes(ids:), 250 at a time):
// rejected records are retried this way once the cursor has passed them.
// An id that is not a customer id as Shopify renders it matches nothing.
func (s *Source) ReadIdentities(ctx context.Context, identity string, ids []string) ([]source.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.id, err)
	}
	if identity != "id" {
		return nil, fmt.Errorf("%s: %w: shopify sources re-read customers by id, not %q (set identity: id)", s.id, source.ErrInvalid, identity)
	}
	seen := map[string]bool{}
	var gids []string
	for _, id := range ids {
		if validID(id) && !seen[id] {
			seen[id] = true
			gids = append(gids, gidPrefix+id)
		}
	}
	var out []source.Record
	for len(gids) > 0 {
		n := min(len(gids), MaxPageSize)
		chunk := gids[:n]
		gids = gids[n:]
		var data struct {
			Nodes []json.RawMessage `json:"nodes"`
		}
		if err := s.query(ctx, nodesQuery, map[string]any{"ids": chunk}, n*nodeCost, &data); err != nil {
			return nil, err
		}
		for _, raw := range data.Nodes {
			if string(raw) == "null" || string(raw) == "{}" {
				continue // deleted, or not a customer
			}
			rec, _, err := s.decode(raw)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

const snapshotQuery = `query OncesyncSnapshot {
  customersCount(limit: null) { count precision }
  customers(first: 1, sortKey: UPDATED_AT, reverse: true) { nodes { id updatedAt } }
}`

// Snapshot is the shop's customers' version: how many there are and the
// latest update (its instant and customer). Any change to a customer moves
// its updatedAt, a new one changes both, a deleted one the count.
func (s *Source) Snapshot(ctx context.Context) (map[string]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.id, err)
	}
	var data struct {
		Count *struct {
			Count     int64  `json:"count"`
			Precision string `json:"precision"`
		} `json:"customersCount"`
		Customers *struct {
			Nodes []struct {
				ID        string `json:"id"`
				UpdatedAt string `json:"updatedAt"`
			} `json:"nodes"`
		} `json:"customers"`
	}
	if err := s.query(ctx, snapshotQuery, map[string]any{}, 4, &data); err != nil {
		return nil, err
	}
	if data.Count == nil || data.Customers == nil {
		return nil, fmt.Errorf("%s: %w: Shopify answered without the count or the customers", s.id, source.ErrUnavailable)
	}
	out := map[string]any{"customers": data.Count.Count, "precision": data.Count.Precision, "latest_id": "", "latest_updated_at": ""}
	if n := data.Customers.Nodes; len(n) > 0 {
		out["latest_id"], out["latest_updated_at"] = n[0].ID, n[0].UpdatedAt
	}
	return out, nil
}
