package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/store"
)

const leaseColumns = `sync_id, token, fence, holder, run_id, expires_at`

// serverNowSQL is the server's clock in unix microseconds (the resolution
// of its timestamps), read when the statement evaluates it: after the locks
// its statement took.
const serverNowSQL = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

func scanLease(sc pgx.Row, dest ...any) (store.Lease, error) {
	var (
		l       store.Lease
		expires int64
	)
	if err := sc.Scan(append([]any{&l.SyncID, &l.Token, &l.Fence, &l.Holder, &l.RunID, &expires}, dest...)...); err != nil {
		return store.Lease{}, err
	}
	l.ExpiresAt = fromNanos(expires)
	return l, nil
}

// leaseClock is what one lease transaction judges expiry by. With
// ServerTime, leases are written and judged on the server's clock, which
// every machine shares: a machine whose clock runs ahead would otherwise
// see a live lease as expired and take it while its holder still writes
// (docs/guide.md#the-store-and-the-leases). The leases returned are put on
// the Store's clock (toLocal), where their callers compare them.
type leaseClock struct {
	now     time.Time     // the server's time, or the Store's clock without ServerTime
	toLocal time.Duration // added to a stored lease time to put it on the Store's clock
}

// leaseClockAt is the leaseClock of a statement that read the server's
// time serverUS (serverNowSQL), sent at before and answered at after on the
// Store's clock: the server read it in between, so the offset is known
// within half the round trip.
func (s *Store) leaseClockAt(before, after time.Time, serverUS int64) leaseClock {
	if !s.serverTime {
		return leaseClock{now: after}
	}
	return leaseClock{now: time.UnixMicro(serverUS), toLocal: -offsetOf(before, after, serverUS)}
}

// local puts l's times on the Store's clock.
func (c leaseClock) local(l store.Lease) store.Lease {
	if !l.ExpiresAt.IsZero() {
		l.ExpiresAt = l.ExpiresAt.Add(c.toLocal)
	}
	return l
}

// LeaseAcquire grants the lease to p.Token when it is free, expired (by the
// store's clock), already p.Token's, or held by p.TakeOver. A grant takes the
// next fence (registered fence + 1, starting at 1) and registers it in the
// same transaction. Otherwise ErrLeaseHeld, naming the holder.
//
// The transaction first locks the sync's fences row (creating it at 0), so
// concurrent acquirers, from this process or another, take turns, and each
// reads the lease as the previous one committed it.
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
	err := s.tx(ctx, "lease acquire", func(tx pgx.Tx) error {
		var serverUS int64
		before := s.now()
		if err := tx.QueryRow(ctx, `INSERT INTO fences AS fe (sync_id, fence) VALUES ($1, 0)
			ON CONFLICT (sync_id) DO UPDATE SET fence = fe.fence RETURNING `+serverNowSQL, p.SyncID).Scan(&serverUS); err != nil {
			return err
		}
		lc := s.leaseClockAt(before, s.now(), serverUS)
		now := lc.now
		cur, err := scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leases WHERE sync_id = $1`, p.SyncID))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case cur.Token != p.Token && cur.ExpiresAt.After(now) && (p.TakeOver == "" || p.TakeOver != cur.Token):
			return fmt.Errorf("sync %q: %w: holder %s, fence %d, expires %s",
				p.SyncID, store.ErrLeaseHeld, cur.Holder, cur.Fence, lc.local(cur).ExpiresAt.Format(time.RFC3339))
		}
		freeFor := store.FreeFor(cur, err == nil, p.Token, now)
		out, err = scanLease(tx.QueryRow(ctx, `WITH f AS (
				UPDATE fences SET fence = fence + 1 WHERE sync_id = $1::text RETURNING fence
			)
			INSERT INTO leases AS l (sync_id, token, fence, holder, run_id, expires_at)
			SELECT $1::text, $2::text, f.fence, $3::text, $4::bigint, $5::bigint FROM f
			ON CONFLICT (sync_id) DO UPDATE SET token = excluded.token, fence = excluded.fence,
				holder = excluded.holder, run_id = excluded.run_id, expires_at = excluded.expires_at
			RETURNING `+leaseColumns,
			p.SyncID, p.Token, p.Holder, p.RunID, nanos(now.Add(p.TTL))))
		out = lc.local(out)
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
	err := s.tx(ctx, "lease renew", func(tx pgx.Tx) error {
		var err error
		out, err = s.leaseRenew(ctx, tx, syncID, token, ttl)
		return err
	})
	return out, err
}

// leaseRenew is LeaseRenew's transaction body, shared with Checkpoint: it
// extends the lease to now+ttl in tx, or returns ErrLeaseLost and writes
// nothing. It needs a transaction (not any querier): it locks the sync's
// fences row first and then the leases row (by its update), the order
// LeaseAcquire takes them in, and holds both until the caller commits. The
// fences row is share-locked, as by every fenced write (fenceCTE): no grant
// can raise the fence before the renewal commits, and the holder's claims
// do not wait for its checkpoint. Errors are the driver's, unmapped.
func (s *Store) leaseRenew(ctx context.Context, tx pgx.Tx, syncID, token string, ttl time.Duration) (store.Lease, error) {
	var registered, serverUS int64
	before := s.now()
	err := tx.QueryRow(ctx, `SELECT fence, `+serverNowSQL+` FROM fences WHERE sync_id = $1 FOR SHARE`, syncID).Scan(&registered, &serverUS)
	lc := s.leaseClockAt(before, s.now(), serverUS)
	now := lc.now
	var cur store.Lease
	if err == nil {
		cur, err = scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leases WHERE sync_id = $1`, syncID))
	}
	found := !errors.Is(err, pgx.ErrNoRows)
	if found && err != nil {
		return store.Lease{}, err
	}
	// Judged on the server's clock; said (an expiry in the message) on ours.
	if why := store.RenewRefusal(lc.local(cur), found, token, now.Add(lc.toLocal), registered); why != "" {
		return store.Lease{}, store.LeaseLostError(syncID, why)
	}
	l, err := scanLease(tx.QueryRow(ctx, `UPDATE leases SET expires_at = $1 WHERE sync_id = $2 RETURNING `+leaseColumns,
		nanos(now.Add(ttl)), syncID))
	return lc.local(l), err
}

// LeaseRelease frees the lease if token holds it (no error if it does not).
// The fence is kept: the next grant still takes a higher one.
func (s *Store) LeaseRelease(ctx context.Context, syncID, token string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE sync_id = $1 AND token = $2`, syncID, token); err != nil {
		return mapErr("lease release", err)
	}
	return nil
}

// LeaseGet returns the current lease row (possibly expired), or ErrNotFound.
func (s *Store) LeaseGet(ctx context.Context, syncID string) (store.Lease, error) {
	var serverUS int64
	before := s.now()
	l, err := scanLease(s.pool.QueryRow(ctx, `SELECT `+leaseColumns+`, `+serverNowSQL+` FROM leases WHERE sync_id = $1`, syncID), &serverUS)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, fmt.Errorf("lease of sync %q: %w", syncID, store.ErrNotFound)
	}
	return s.leaseClockAt(before, s.now(), serverUS).local(l), mapErr("lease get", err)
}
