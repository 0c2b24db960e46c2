package barrier_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/oncesync/oncesync/internal/barrier"
)

// genValue returns a random JSON-shaped value (as decoded with UseNumber).
func genValue(r *rand.Rand, depth int) any {
	k := r.IntN(9)
	if depth >= 4 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return json.Number(strconv.FormatInt(r.Int64N(2000)-1000, 10))
	case 3:
		return json.Number(strconv.FormatFloat(r.NormFloat64()*100, 'g', -1, 64) + "e0")
	case 4, 5:
		return genString(r)
	case 6:
		l := make([]any, r.IntN(5))
		for i := range l {
			l[i] = genValue(r, depth+1)
		}
		return l
	default:
		m := map[string]any{}
		for range r.IntN(6) {
			m[genString(r)] = genValue(r, depth+1)
		}
		return m
	}
}

func genString(r *rand.Rand) string {
	const alphabet = "ab:{}\"\\ é\x00"
	runes := []rune(alphabet)
	b := make([]rune, r.IntN(5))
	for i := range b {
		b[i] = runes[r.IntN(len(runes))]
	}
	return string(b)
}

// writeJSON writes v as JSON with object keys in an order chosen by r.
func writeJSON(buf *bytes.Buffer, r *rand.Rand, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			writeJSON(buf, r, x[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSON(buf, r, e)
		}
		buf.WriteByte(']')
	case json.Number:
		buf.WriteString(string(x))
	default:
		b, _ := json.Marshal(x)
		buf.Write(b)
	}
}

// mutate changes one leaf of v (or adds a key), returning the new value.
func mutate(r *rand.Rand, v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x)+1)
		for k, e := range x {
			out[k] = e
		}
		if len(x) == 0 || r.IntN(4) == 0 {
			out["\x01new"] = nil
			return out
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		k := keys[r.IntN(len(keys))]
		out[k] = mutate(r, x[k])
		return out
	case []any:
		out := append([]any(nil), x...)
		if len(x) == 0 {
			return append(out, nil)
		}
		i := r.IntN(len(x))
		out[i] = mutate(r, x[i])
		return out
	case string:
		return x + "!"
	case json.Number:
		return json.Number(string(x) + "1")
	case bool:
		return !x
	case nil:
		return false
	}
	return nil
}

// TestSnapshotProperties: over random nested inputs, the hash does not
// depend on the textual order of object keys, is the same on every call,
// and changes when any leaf changes.
func TestSnapshotProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		in := map[string]any{}
		for range 1 + r.IntN(5) {
			in[genString(r)] = genValue(r, 0)
		}
		var a, b bytes.Buffer
		writeJSON(&a, r, in)
		writeJSON(&b, r, in)
		ha, err := barrier.SnapshotJSON(&a)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		hb, err := barrier.SnapshotJSON(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if ha != hb {
			t.Fatalf("case %d: key order changed the hash:\n%s\n%s", i, a.String(), b.String())
		}
		direct, err := barrier.Snapshot(in)
		if err != nil {
			t.Fatal(err)
		}
		if direct != ha {
			t.Fatalf("case %d: Snapshot %s != SnapshotJSON %s for %s", i, direct, ha, b.String())
		}
		changed, err := barrier.Snapshot(mutate(r, in).(map[string]any))
		if err != nil {
			t.Fatal(err)
		}
		if changed == direct {
			t.Fatalf("case %d: a changed input kept the hash %s (%s)", i, direct, b.String())
		}
	}
}
