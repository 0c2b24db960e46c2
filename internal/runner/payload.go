package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/store"
)

// payloadPrint fingerprints what the records of p's source become at the
// destination: what is read (the source's ID and Sync.Reads, its table or
// query and cursor column), the identity that names each row's slot, the
// mapping and the salt of destination settings other than the sync's base
// (run.setSalt; omitted when "", so prints saved before it stay equal). A
// keyset source's cursor saved under another print moved past rows that
// were sent as something else, and that the next run would never read
// again: docs/guide.md#changing-a-sync.
func payloadPrint(p Params, salt string) string {
	b, err := json.Marshal(struct {
		Source, Reads, Identity string
		Mapping                 mapping.Spec
		Destination             string `json:",omitempty"`
	}{p.Source.ID(), p.Sync.Reads, p.Sync.Identity, p.Sync.Mapping, salt})
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
	r.salt = ""
	if r.Sync.DestinationPayload != base {
		r.salt = "dest:" + r.Sync.DestinationPayload
	}
	if r.Sync.DestinationAddress != addr {
		r.salt += " at:" + r.Sync.DestinationAddress
	}
	r.payload = payloadPrint(r.Params, r.salt)
}

// addressBaseID is the id the sync's first destination address is kept
// under, beside its payload base (store.Cursors.PayloadBase). Sync ids
// never hold "#" (partition.SyncID), so it names no sync.
func addressBaseID(syncID string) string { return syncID + "#address" }

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
