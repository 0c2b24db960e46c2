package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

func scanLease(sc rowScanner) (store.Lease, error) {
	var (
		l       store.Lease
		expires int64
	)
	if err := sc.Scan(&l.SyncID, &l.Token, &l.Fence, &l.Holder, &l.RunID, &expires); err != nil {
		return store.Lease{}, err
	}
	l.ExpiresAt = fromNanos(expires)
	return l, nil
}

const leaseColumns = `sync_id, token, fence, holder, run_id, expires_at`

// LeaseAcquire grants the lease to p.Token when it is free, expired (by the
// store's clock), already p.Token's, or held by p.TakeOver. A grant takes the
// next fence (registered fence + 1, starting at 1) and registers it in the
// same transaction. Otherwise ErrLeaseHeld, naming the holder.
func (s *Store) LeaseAcquire(ctx context.Context, p store.LeaseAcquireParams) (store.Lease, error) {
	switch {
	case p.SyncID == "":
		return store.Lease{}, invalidf("lease sync id is empty")
	case p.Token == "":
		return store.Lease{}, invalidf("lease token is empty")
	case p.TTL <= 0:
		return store.Lease{}, invalidf("lease ttl %s", p.TTL)
	}
	var out store.Lease
	err := s.write(ctx, "lease acquire", func(tx *sql.Tx) error {
		now := s.now()
		cur, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE sync_id = ?`, p.SyncID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case cur.Token != p.Token && cur.ExpiresAt.After(now) && (p.TakeOver == "" || p.TakeOver != cur.Token):
			return fmt.Errorf("sync %q: %w: holder %s, fence %d, expires %s",
				p.SyncID, store.ErrLeaseHeld, cur.Holder, cur.Fence, cur.ExpiresAt.Format(time.RFC3339))
		}
		freeFor := store.FreeFor(cur, err == nil, p.Token, now)
		var fence int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO fences (sync_id, fence) VALUES (?, 1)
			ON CONFLICT (sync_id) DO UPDATE SET fence = fences.fence + 1 RETURNING fence`, p.SyncID).Scan(&fence); err != nil {
			return err
		}
		out, err = scanLease(tx.QueryRowContext(ctx, `INSERT INTO leases (sync_id, token, fence, holder, run_id, expires_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6)
			ON CONFLICT (sync_id) DO UPDATE SET token = excluded.token, fence = excluded.fence,
				holder = excluded.holder, run_id = excluded.run_id, expires_at = excluded.expires_at
			RETURNING `+leaseColumns,
			p.SyncID, p.Token, fence, p.Holder, p.RunID, nanos(now.Add(p.TTL))))
		out.FreeFor = freeFor
		return err
	})
	return out, err
}

// LeaseRenew extends the lease to now+ttl if token still holds it, it has not
// expired (an expired lease cannot be renewed, even if nobody took it) and no
// newer fence has been registered; else ErrLeaseLost.
func (s *Store) LeaseRenew(ctx context.Context, syncID, token string, ttl time.Duration) (store.Lease, error) {
	if ttl <= 0 {
		return store.Lease{}, invalidf("lease ttl %s", ttl)
	}
	var out store.Lease
	err := s.write(ctx, "lease renew", func(tx *sql.Tx) error {
		var err error
		out, err = s.leaseRenew(ctx, tx, syncID, token, ttl)
		return err
	})
	return out, err
}

// leaseRenew is LeaseRenew's transaction body, shared with Checkpoint: it
// extends the lease to now+ttl in tx, or returns ErrLeaseLost and writes
// nothing.
func (s *Store) leaseRenew(ctx context.Context, tx *sql.Tx, syncID, token string, ttl time.Duration) (store.Lease, error) {
	now := s.now()
	var registered int64
	cur, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE sync_id = ?`, syncID))
	if err == nil {
		err = tx.QueryRowContext(ctx, `SELECT fence FROM fences WHERE sync_id = ?`, syncID).Scan(&registered)
	}
	found := !errors.Is(err, sql.ErrNoRows)
	if found && err != nil {
		return store.Lease{}, err
	}
	if why := store.RenewRefusal(cur, found, token, now, registered); why != "" {
		return store.Lease{}, store.LeaseLostError(syncID, why)
	}
	return scanLease(tx.QueryRowContext(ctx, `UPDATE leases SET expires_at = ? WHERE sync_id = ? RETURNING `+leaseColumns,
		nanos(now.Add(ttl)), syncID))
}

// LeaseRelease frees the lease if token holds it (no error if it does not).
// The fence is kept: the next grant still takes a higher one.
func (s *Store) LeaseRelease(ctx context.Context, syncID, token string) error {
	return s.write(ctx, "lease release", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE sync_id = ? AND token = ?`, syncID, token)
		return err
	})
}

// LeaseGet returns the current lease row (possibly expired), or ErrNotFound.
func (s *Store) LeaseGet(ctx context.Context, syncID string) (store.Lease, error) {
	l, err := scanLease(s.r.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE sync_id = ?`, syncID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, fmt.Errorf("lease of sync %q: %w", syncID, store.ErrNotFound)
	}
	return l, s.mapErr("lease get", err)
}
