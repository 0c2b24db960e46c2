package slicesql_test

import (
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/source/slicesql"
)

// The bits a condition computes decide partition.Of's partition when Bits
// says exact, and are implied by it always: a condition keeps a superset.
func TestBitsAgreeWithPartitionOf(t *testing.T) {
	ids := []string{"", "a", "é", "-9223372036854775808"}
	for i := 0; i < 3000; i++ {
		ids = append(ids, fmt.Sprint(i*7919-10_000), fmt.Sprintf("c%d@example.com", i))
	}
	for n := 1; n <= 64; n++ {
		for k := 1; k <= n; k++ {
			mask, want, exact, ok := slicesql.Bits(n, k)
			if ok != (n%2 == 0) {
				t.Fatalf("Bits(%d, %d): ok %v", n, k, ok)
			}
			if exact != (ok && n&(n-1) == 0) {
				t.Fatalf("Bits(%d, %d): exact %v", n, k, exact)
			}
			if !ok {
				continue
			}
			for _, id := range ids {
				h := fnv.New64a()
				h.Write([]byte(id))
				in := int(h.Sum64()&uint64(mask)) == want
				of := partition.Of(id, n) == k
				if of && !in || exact && in != of {
					t.Fatalf("n %d k %d id %q: condition %v, partition.Of %v", n, k, id, in, of)
				}
			}
		}
	}
}
