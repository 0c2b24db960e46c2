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
// query and cursor column), the identity that names each row's slot and the
// mapping. A keyset source's cursor saved under another print moved past
// rows that were sent as something else, and that the next run would never
// read again: docs/guide.md#changing-a-sync.
func payloadPrint(p Params) string {
	b, err := json.Marshal(struct {
		Source, Reads, Identity string
		Mapping                 mapping.Spec
	}{p.Source.ID(), p.Sync.Reads, p.Sync.Identity, p.Sync.Mapping})
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
