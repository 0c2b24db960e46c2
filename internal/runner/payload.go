package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// payloadPrint fingerprints what the records of p's source become at the
// destination: what is read (the source's ID and Sync.Reads, its table or
// query and cursor column), the identity that names each row's slot, the
// mapping and the salt of destination settings other than the sync's base
// (run.setSalt; omitted when "", so prints saved before it stay equal). A
// keyset source's cursor saved under another print moved past rows that
// were sent as something else, and that the next run would never read
// again: docs/guide.md#changing-a-sync. A mirror's is marked too: its runs
// read the whole source, the first after the switch included, which would
// otherwise go on from an upsert's cursor and find no row gone.
func payloadPrint(p Params, salt string) string {
	b, err := json.Marshal(struct {
		Source, Reads, Identity string
		Mapping                 mapping.Spec
		Destination             string `json:",omitempty"`
		Mirror                  bool   `json:",omitempty"`
	}{p.Source.ID(), p.Sync.Reads, p.Sync.Identity, p.Sync.Mapping, salt, p.Sync.Mirror != nil})
	if err != nil {
		// Strings and string maps always marshal.
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// startCursor is where a run reads from, given the saved cursor: the start
// of the source when reset, or when the cursor was saved under another
// payload print (one saved before prints were kept, "", is trusted).
func startCursor(cur store.Cursor, print string, reset bool) (cursor string, changed bool) {
	switch {
	case reset:
		return "", false
	case cur.Value != "" && cur.Payload != "" && cur.Payload != print:
		return "", true
	}
	return cur.Value, false
}

// setSalt sets r.salt from the sync's payload base and its first
// destination address, and folds it into r.payload. Under the base settings
// and address a record's hash is its mapped values' alone, as before
// payload bases existed; under any others it includes them, so every slot
// delivered under other settings, or to another account, differs
// (docs/guide.md#changing-a-sync).
func (r *run) setSalt(base, addr string) {
	r.setSaltEpoch(base, addr, 0)
}

// setSaltEpoch is setSalt under the sync's layout epoch (layoutEpoch): any
// epoch but the first salts every record hash too.
func (r *run) setSaltEpoch(base, addr string, epoch int) {
	r.salt = ""
	if r.Sync.DestinationPayload != base {
		r.salt = "dest:" + r.Sync.DestinationPayload
	}
	if r.Sync.DestinationAddress != addr {
		r.salt += " at:" + r.Sync.DestinationAddress
	}
	if epoch > 0 {
		r.salt += " epoch:" + strconv.Itoa(epoch)
	}
	r.payload = payloadPrint(r.Params, r.salt)
}

// layoutEpoch is the sync's layout epoch: how many times its Sync.Layout
// (the identity and partition count that name its slots and the ledgers
// they are kept in) changed since it was first recorded. Slots written
// under one layout are not met under another, so when a layout comes back
// (partitions 1, 4, then 1 again) its slots say what the destination held
// before the change, not now: a row that changed and changed back would be
// judged delivered and left stale. Every change starts a new epoch, mixed
// into every record hash, so slots of any earlier epoch differ and every
// record is sent once (docs/guide.md#changing-a-sync). Epoch i's layout is
// kept as the payload base of "<sync>#layout<i>" (sync ids never hold "#";
// a partition's run reads its sync's); record false only reads.
func (r *run) layoutEpoch(ctx context.Context, st interface {
	PayloadBase(ctx context.Context, syncID, print string) (string, error)
	GetPayloadBase(ctx context.Context, syncID string) (string, bool, error)
}, record bool) (int, error) {
	cur := r.Sync.Layout
	if cur == "" {
		return 0, nil
	}
	owner := partition.Parent(r.Sync.ID)
	key := func(i int) string { return owner + "#layout" + strconv.Itoa(i) }
	for attempt := 0; ; attempt++ {
		n, last := 0, ""
		for {
			v, found, err := st.GetPayloadBase(ctx, key(n))
			if err != nil {
				return 0, err
			}
			if !found {
				break
			}
			last, n = v, n+1
		}
		switch {
		case n > 0 && last == cur:
			return n - 1, nil
		case !record:
			return n, nil
		}
		// A new epoch; another run recording the same one at once agrees.
		v, err := st.PayloadBase(ctx, key(n), cur)
		if err != nil {
			return 0, err
		}
		if v == cur || attempt == 3 {
			return n, nil
		}
	}
}

// recordEpoch records the run's layout epoch (r.epoch) if it is new; every
// ledger write of the run calls it first. A layout another run recorded in
// between under that epoch's number fails the run: its salt would not be
// the epoch's.
func (r *run) recordEpoch(ctx context.Context) error {
	r.epochOnce.Do(func() {
		n, err := r.layoutEpoch(ctx, r.Store, true)
		switch {
		case err != nil:
			r.epochErr = storeFailure(ctx, err, "record the sync's layout epoch")
		case n != r.epoch:
			r.epochErr = failure.New(failure.StoreUnavailable, fmt.Sprintf(
				"the sync's identity or partitions changed while this run started (layout epoch %d, now %d): run it again", r.epoch, n))
		}
	})
	return r.epochErr
}

// addressBaseID is the id the sync's first destination address is kept
// under, beside its payload base (store.Cursors.PayloadBase). Sync ids
// never hold "#" (partition.SyncID), so it names no sync.
func addressBaseID(syncID string) string { return syncID + "#address" }

// accountBaseID is the id the address a sync first reached under the
// account name account (Sync.Account) is kept under, like addressBaseID:
// a later credential under the same name stands for that address. The
// owner's id, so a partitioned sync's partitions share it.
func accountBaseID(syncID, account string) string {
	sum := sha256.Sum256([]byte(account))
	return partition.Parent(syncID) + "#account:" + hex.EncodeToString(sum[:8])
}

// vendorBaseID is the id the account name the vendor gave for address (a
// destination address, config.DestinationAddress) is kept under, like
// addressBaseID: each address is asked about once.
func vendorBaseID(syncID, address string) string {
	sum := sha256.Sum256([]byte(address))
	return partition.Parent(syncID) + "#vendor:" + hex.EncodeToString(sum[:8])
}

// noVendorAccount is kept under vendorBaseID when the vendor would not say.
const noVendorAccount = "-"

// vendorAccount names the account the destination's credential reaches,
// as its vendor says (destination.AccountTeller), for a sync without
// destination.account: the address first reached under that name then
// stands for the address, so a new API key of the same account sends
// nothing again (docs/guide.md#changing-a-sync). "" when the destination
// cannot tell. The vendor is asked once per address: the answer is kept.
// When it cannot be asked now (unavailable, rate limited), that matters
// only if the address is not the sync's first: the run then fails, to be
// retried, rather than send every record to what may be the same account.
func (r *run) vendorAccount(ctx context.Context) (string, error) {
	t, ok := r.Destination.(destination.AccountTeller)
	if !ok {
		return "", nil
	}
	key := vendorBaseID(r.Sync.ID, r.Sync.DestinationAddress)
	name, found, err := r.Store.GetPayloadBase(ctx, key)
	if err != nil {
		return "", storeFailure(ctx, err, "load the sync's destination account")
	}
	if !found {
		id, err := t.AccountID(ctx)
		switch {
		case errors.Is(err, destination.ErrNoAccountID):
			name = noVendorAccount
		case failure.CodeOf(err) == failure.DestinationAuth:
			return "", err // the key is refused: every write would be
		case err != nil && ctx.Err() != nil:
			return "", cancelled(ctx) // a drain, not the vendor's answer
		case err != nil:
			first, known, gerr := r.Store.GetPayloadBase(ctx, addressBaseID(r.Sync.ID))
			if gerr != nil {
				return "", storeFailure(ctx, gerr, "load the sync's destination address")
			}
			if known && first != r.Sync.DestinationAddress {
				return "", failure.Wrap(failure.CodeOf(err), err,
					"%s; it was asked which account the sync's new credential reaches, so as not to send every record again to the same account: the run is retried; let that request through (one per new credential): destination.account set now would take the new credential for another account and send every record again (docs/guide.md#changing-a-sync)",
					failure.Detail(err))
			}
			return "", nil // the first address: nothing depends on the answer yet
		default:
			sum := sha256.Sum256([]byte("oncesync vendor account\x00" + id))
			name = "vendor " + hex.EncodeToString(sum[:12])
		}
		if name, err = r.Store.PayloadBase(ctx, key, name); err != nil {
			return "", storeFailure(ctx, err, "record the sync's destination account")
		}
	}
	if name == noVendorAccount {
		return "", nil
	}
	return name, nil
}

// accountAddress sets Sync.DestinationAddress to the address that stands
// for the account records go to: the one first reached under the account's
// name (Sync.Account), else under the account its vendor says the credential
// reaches (vendorAccount). A name met for the first time takes the address
// the vendor's account stands for, when the vendor can tell: a name set after
// a rotation, or together with a new key, sends nothing again
// (docs/guide.md#changing-a-sync).
func (r *run) accountAddress(ctx context.Context) error {
	keep := func(name string) error {
		addr, err := r.Store.PayloadBase(ctx, accountBaseID(r.Sync.ID, name), r.Sync.DestinationAddress)
		if err != nil {
			return storeFailure(ctx, err, "load the sync's destination account")
		}
		r.Sync.DestinationAddress = addr
		return nil
	}
	name := r.Sync.Account
	if name == "" {
		vendor, err := r.vendorAccount(ctx)
		if err != nil || vendor == "" {
			return err
		}
		return keep(vendor)
	}
	named, found, err := r.Store.GetPayloadBase(ctx, accountBaseID(r.Sync.ID, name))
	switch {
	case err != nil:
		return storeFailure(ctx, err, "load the sync's destination account")
	case found:
		r.Sync.DestinationAddress = named // the name answers: the vendor is not asked
		return nil
	}
	vendor, err := r.vendorAccount(ctx)
	switch {
	case failure.CodeOf(err) == failure.StoreUnavailable:
		return err
	case err == nil && vendor != "":
		if err := keep(vendor); err != nil {
			return err
		}
	} // the vendor cannot tell now: the name takes the address as it is
	return keep(name)
}

// sourceBaseID is the id the source id the sync's keys are made with is
// kept under (run.sourceKey), like addressBaseID.
func sourceBaseID(syncID string) string { return syncID + "#source" }

// sourceID is the source id of the run's slot and delivery keys: the one
// the sync first ran with, not necessarily its source's now. A slot says
// what the destination holds for a row; a row read from the file's new
// path, or from the same table through another server, is the same row,
// and its values decide whether it is sent (docs/guide.md#changing-a-sync).
func (r *run) sourceID() string {
	if r.sourceKey != "" {
		return r.sourceKey
	}
	return r.Source.ID()
}
