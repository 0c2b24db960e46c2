package brevo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
)

// The oracle: how the bulk path built its bodies before encode.go (commit
// c8b73a5), with json.Marshal. The new encoder must send these exact bytes,
// split at the same places.

// importItem is one element of jsonBody (swagger: requestContactImport_jsonBody).
type importItem struct {
	Email      string         `json:"email,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// importRequest is the body of POST /contacts/import (swagger: requestContactImport).
type importRequest struct {
	JSONBody                []json.RawMessage `json:"jsonBody"`
	ListIDs                 []int64           `json:"listIds"`
	UpdateExistingContacts  bool              `json:"updateExistingContacts"`
	EmptyContactsAttributes bool              `json:"emptyContactsAttributes"`
	DisableNotification     bool              `json:"disableNotification"`
}

func marshalRequest(listIDs []int64, items []json.RawMessage) []byte {
	return marshal(importRequest{JSONBody: items, ListIDs: listIDs,
		UpdateExistingContacts: true, EmptyContactsAttributes: true, DisableNotification: true})
}

// oracleAttrs is an import item's attributes: the mapped ones, and ext_id
// as EXT_ID (the item has no field of its own for it).
func oracleAttrs(extID string, mapped bool, attrs map[string]any) map[string]any {
	if !mapped {
		return attrs
	}
	out := map[string]any{"EXT_ID": extID}
	for k, v := range attrs {
		out[k] = v
	}
	return out
}

// marshalBodies is the old bulk path: each item json.Marshal'ed, the page
// split under maxBody, each body json.Marshal'ed. It returns the bodies and
// the positions (in cs) each one holds.
func marshalBodies(listIDs []int64, cs []contact, maxBody int) (bodies [][]byte, chunks [][]int) {
	items := make([]json.RawMessage, len(cs))
	for i, c := range cs {
		items[i] = marshal(importItem{Email: c.email, Attributes: oracleAttrs(c.extID, c.extID != "" || c.clearExtID, c.attrs)})
	}
	envelope := len(marshalRequest(listIDs, []json.RawMessage{}))
	var (
		cur  []int
		size = envelope
	)
	for i := range cs {
		n := len(items[i])
		if len(cur) > 0 {
			n++ // comma
		}
		if len(cur) > 0 && size+n > maxBody {
			chunks = append(chunks, cur)
			cur, size = nil, envelope
			n--
		}
		cur = append(cur, i)
		size += n
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	for _, ch := range chunks {
		body := make([]json.RawMessage, len(ch))
		for n, i := range ch {
			body[n] = items[i]
		}
		bodies = append(bodies, marshalRequest(listIDs, body))
	}
	return bodies, chunks
}

// appendBodies is the new bulk path (pageWrite.bulk) without the requests.
func appendBodies(listIDs []int64, cs []contact, maxBody int) (bodies [][]byte, chunks [][]int) {
	w := &pageWrite{d: &Destination{listIDs: listIDs, maxBody: maxBody}, contacts: cs}
	idx := make([]int, len(cs))
	for i := range idx {
		idx[i] = i
	}
	page := w.encodeImport(idx)
	for _, s := range page.chunks(maxBody) {
		bodies = append(bodies, page.body(s))
		chunks = append(chunks, idx[s.from:s.to])
	}
	return bodies, chunks
}

// checkSameBodies fails t unless the new path sends the old path's bytes
// in the same chunks.
func checkSameBodies(t *testing.T, listIDs []int64, cs []contact, maxBody int) {
	t.Helper()
	want, wantChunks := marshalBodies(listIDs, cs, maxBody)
	got, gotChunks := appendBodies(listIDs, cs, maxBody)
	if !reflect.DeepEqual(gotChunks, wantChunks) {
		t.Fatalf("maxBody %d: chunks %v, json.Marshal path %v", maxBody, gotChunks, wantChunks)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("maxBody %d, body %d:\n got %q\nwant %q", maxBody, i, got[i], want[i])
		}
	}
}

// parseChecked is parseRecord, checked against the old parseRecord's
// json.Marshal of the attributes: the same verdict, and attrsJSON is
// Marshal's bytes.
func parseChecked(t *testing.T, r destination.Record) contact {
	t.Helper()
	c := parseRecord(r)
	attrs, isMap := r.Data["attributes"].(map[string]any)
	extID, _ := r.Data["ext_id"].(string)
	_, mapped := r.Data["ext_id"] // an empty one clears it: EXT_ID ""
	if !isMap && !mapped {
		return c
	}
	if mapped {
		for k := range attrs {
			if strings.EqualFold(k, "EXT_ID") {
				if !strings.Contains(c.invalid, "mapped twice") {
					t.Fatalf("ext_id and attribute %q: parseRecord says %q, want it refused", k, c.invalid)
				}
				return c
			}
		}
	}
	attrs = oracleAttrs(extID, mapped, attrs)
	want, err := json.Marshal(attrs)
	switch {
	case err != nil:
		if c.invalid != "attributes cannot be encoded as JSON" {
			t.Fatalf("json.Marshal refuses %#v (%v) but parseRecord says %q", attrs, err, c.invalid)
		}
	case c.invalid == "attributes cannot be encoded as JSON":
		t.Fatalf("parseRecord refuses %#v, json.Marshal gives %s", attrs, want)
	case len(attrs) == 0:
		if c.attrsJSON != nil {
			t.Fatalf("attrsJSON %q for empty attributes, want nil", c.attrsJSON)
		}
	case !bytes.Equal(c.attrsJSON, want):
		t.Fatalf("attrsJSON\n got %q\nwant %q", c.attrsJSON, want)
	}
	return c
}

// gen makes random mapped values, biased to what escapes or sorts oddly.
type gen struct{ r *rand.Rand }

var genPieces = []string{
	"a", "Z", "é", "日本語", "€", "😀", "<", ">", "&", "<script>", "&amp;", "\u2028", "\u2029",
	"\"", "\\", "/", "\x00", "\x1f", "\x7f", "\b", "\f", "\n", "\r", "\t", "\xff", "\xc3", "\xe2\x80",
	"\ufffd", "\ufeff", " ", "@", "example.com", "FIRSTNAME", "SMS", "+33612345678", "EXT_ID",
}

func (g gen) str() string {
	var b strings.Builder
	for range g.r.IntN(6) {
		b.WriteString(genPieces[g.r.IntN(len(genPieces))])
	}
	return b.String()
}

var genNumbers = []json.Number{"0", "-0", "1", "-12", "12.50", "0.000", "1e+300", "1E-7", "-2.5e10",
	"123456789012345678901234567890", "12345678901234567890.123456789", ""}

var genFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 1e-6, 1e-7, 9.99e-7, 123456789, 1e20, 1e21,
	-1e21, 1.5e300, 5e-324, math.MaxFloat64, -2.5e-10, 1 << 53, 3.14159}

func (g gen) value(depth int) any {
	n := 11
	if depth >= 3 {
		n = 9 // no more nesting
	}
	switch g.r.IntN(n) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2, 3:
		return g.str()
	case 4:
		return genFloats[g.r.IntN(len(genFloats))] * float64(g.r.IntN(3)+1)
	case 5:
		return float32(genFloats[g.r.IntN(len(genFloats))])
	case 6:
		return g.r.Int64() >> g.r.IntN(64)
	case 7:
		return int(g.r.Int32())
	case 8:
		return genNumbers[g.r.IntN(len(genNumbers))]
	case 9:
		return g.object(depth + 1)
	default:
		if g.r.IntN(5) == 0 {
			return []any(nil)
		}
		l := make([]any, g.r.IntN(4))
		for i := range l {
			l[i] = g.value(depth + 1)
		}
		return l
	}
}

func (g gen) object(depth int) map[string]any {
	if g.r.IntN(10) == 0 {
		return nil
	}
	m := map[string]any{}
	for range g.r.IntN(6) {
		m[g.str()] = g.value(depth)
	}
	return m
}

func (g gen) record(i int) destination.Record {
	data := map[string]any{}
	switch g.r.IntN(4) {
	case 0:
		data["email"] = fmt.Sprintf("user%d@example.com", i)
	case 1:
		data["email"] = g.str() + "@" + g.str()
	case 2:
		data["email"] = ""
	}
	if g.r.IntN(4) == 0 {
		data["ext_id"] = g.str()
	}
	if g.r.IntN(8) > 0 {
		attrs := g.object(0)
		if g.r.IntN(3) == 0 {
			if attrs == nil {
				attrs = map[string]any{}
			}
			attrs["SMS"] = "+3361234" + fmt.Sprint(i)
		}
		data["attributes"] = attrs
	}
	return destination.Record{Key: fmt.Sprintf("%064x", i), Data: data}
}

func TestImportBodyMatchesMarshal(t *testing.T) {
	t.Parallel()
	g := gen{r: rand.New(rand.NewPCG(20261130, 1))}
	for round := range 200 {
		var cs []contact
		for i := range 1 + g.r.IntN(40) {
			c := parseChecked(t, g.record(i))
			if c.invalid == "attributes cannot be encoded as JSON" || strings.Contains(c.invalid, "mapped twice") {
				continue // never sent
			}
			cs = append(cs, c)
		}
		if len(cs) == 0 {
			continue
		}
		listIDs := [][]int64{{2}, {1, 22, 333}, {math.MaxInt64}, nil}[round%4]
		for _, maxBody := range []int{MaxImportBody, 1, 150, 400, 1000 + g.r.IntN(2000)} {
			checkSameBodies(t, listIDs, cs, maxBody)
		}
	}
}

// TestEncodeAttrsEdges: values outside the fast path give json.Marshal's
// bytes, and everything json.Marshal refuses is rejected with the same
// message as before.
func TestEncodeAttrsEdges(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	deep := map[string]any{"v": "bottom"}
	for range 2 * maxFastDepth {
		deep = map[string]any{"d": deep, "l": []any{1}}
	}
	encodable := []map[string]any{
		{"t": at}, {"raw": []byte("x<y")}, {"u": uint8(3), "u64": uint64(math.MaxUint64)}, {"i32": int32(-5), "i8": int8(1)},
		{"ss": []string{"<a>", "\u2028"}}, {"ms": map[string]string{"b": "1", "a": "&"}}, {"rm": json.RawMessage(`{"b" : 1, "a":[ 2 ]}`)},
		{"nested": map[string]any{"t": at, "n": json.Number("1.0")}}, {"deep": deep}, {"empty": map[string]any{}, "list": []any{}},
		{"n": json.Number("")}, {"f32": float32(1e-7), "f32big": float32(1e22), "f32small": float32(0.1)},
	}
	for _, attrs := range encodable {
		c := parseChecked(t, destination.Record{Data: map[string]any{"email": "a@example.com", "attributes": attrs}})
		if c.invalid != "" {
			t.Fatalf("%#v rejected: %s", attrs, c.invalid)
		}
		checkSameBodies(t, []int64{2}, []contact{c}, MaxImportBody)
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	cyclicList := []any{nil}
	cyclicList[0] = cyclicList
	refused := []map[string]any{
		{"nan": math.NaN()}, {"inf": math.Inf(1)}, {"ninf": float32(math.Inf(-1))}, {"n": json.Number("1.")},
		{"n": json.Number("0x10")}, {"n": json.Number("NaN")}, {"n": json.Number("+1")}, {"n": json.Number("01")},
		{"ch": make(chan int)}, {"fn": func() {}}, {"c": complex(1, 2)}, {"nested": []any{map[string]any{"x": math.NaN()}}},
		{"cyclic": cyclic}, {"cyclicList": cyclicList},
	}
	for _, attrs := range refused {
		c := parseChecked(t, destination.Record{Data: map[string]any{"email": "a@example.com", "attributes": attrs}})
		if c.invalid != "attributes cannot be encoded as JSON" {
			t.Fatalf("%v: invalid = %q", attrs, c.invalid)
		}
	}
}

func TestValidNumberMatchesMarshal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0", "-0", "1", "-", "--1", "1.", ".1", "1.5", "1e", "1e5", "1E+5", "1e-", "1e+", "01", "-01",
		"1.5e-10", "0.0e0", " 1", "1 ", "1_000", "Infinity", "0x1", "9223372036854775808", "1.2.3", "1ee5", "-.5", "0e", "e1"} {
		_, err := json.Marshal(json.Number(s))
		if got := validNumber(s); got != (err == nil) {
			t.Errorf("validNumber(%q) = %v, json.Marshal error %v", s, got, err)
		}
	}
}

// FuzzImportBodyMatchesMarshal checks that parseRecord refuses exactly the
// attributes json.Marshal refuses, keeps Marshal's bytes, and that the bulk
// bodies and their split are the bytes and split of the json.Marshal path.
func FuzzImportBodyMatchesMarshal(f *testing.F) {
	f.Add("ann@example.com", "FIRSTNAME", "Ann <&>", 1.5, int64(-3), "12.50", true, uint16(0))
	f.Add("", "\u2028", "\xff\x00", math.NaN(), int64(0), "1.", false, uint16(120))
	f.Add("日本@例え.jp", "", "", 1e21, int64(math.MinInt64), "", true, uint16(300))
	f.Fuzz(func(t *testing.T, email, key, val string, x float64, n int64, num string, b bool, maxBody uint16) {
		attrs := map[string]any{
			key: val, "X": x, "N": n, "NUM": json.Number(num), "B": b, "NIL": nil,
			"NESTED": map[string]any{val: []any{key, x, float32(x), json.Number(num), map[string]any{}}},
		}
		cs := []contact{
			parseChecked(t, destination.Record{Data: map[string]any{"email": email, "attributes": attrs}}),
			parseChecked(t, destination.Record{Data: map[string]any{"email": val, "attributes": map[string]any{key: num}}}),
			parseChecked(t, destination.Record{Data: map[string]any{"email": email, "attributes": map[string]any{}}}),
			parseChecked(t, destination.Record{Data: map[string]any{"attributes": map[string]any{"SMS": val, key: int(n)}}}),
		}
		var sent []contact
		for _, c := range cs {
			if c.invalid != "attributes cannot be encoded as JSON" {
				sent = append(sent, c)
			}
		}
		checkSameBodies(t, []int64{int64(n & math.MaxInt64)}, sent, int(maxBody))
		checkSameBodies(t, []int64{2}, sent, MaxImportBody)
	})
}

// benchRecords are n records as the bench's CSV maps them (email, FIRSTNAME,
// LASTNAME; cmd/oncesync-bench writeContacts).
func benchRecords(n int) []destination.Record {
	first := []string{"Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Leslie"}
	last := []string{"Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Lamport"}
	recs := make([]destination.Record, n)
	for i := range recs {
		recs[i] = destination.Record{Key: fmt.Sprintf("%064x", i+1), Data: map[string]any{
			"email":      fmt.Sprintf("contact%07d@example.com", i+1),
			"attributes": map[string]any{"FIRSTNAME": first[(i+1)%10], "LASTNAME": last[((i+1)/10)%10]},
		}}
	}
	return recs
}

// BenchmarkBulkBody is the CPU Write spends on one 500-record bulk page
// before the request: parse (parseRecord of every record), encode (the
// request body), page (both).
func BenchmarkBulkBody(b *testing.B) {
	d, err := New(Params{APIKey: "k", Mode: ModeBulk, ListIDs: []int64{2}})
	if err != nil {
		b.Fatal(err)
	}
	recs := benchRecords(500)
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	parse := func(w *pageWrite) {
		w.contacts = make([]contact, len(recs))
		for i, r := range recs {
			w.contacts[i] = parseRecord(r)
		}
	}
	encode := func(w *pageWrite) int {
		page := w.encodeImport(idx)
		n := 0
		for _, s := range page.chunks(w.d.maxBody) {
			n += len(page.body(s))
		}
		return n
	}
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		w := &pageWrite{d: d}
		for b.Loop() {
			parse(w)
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		w := &pageWrite{d: d}
		parse(w)
		for b.Loop() {
			encode(w)
		}
	})
	b.Run("page", func(b *testing.B) {
		b.ReportAllocs()
		w := &pageWrite{d: d}
		var n int
		for b.Loop() {
			parse(w)
			n = encode(w)
		}
		b.ReportMetric(float64(n), "body-bytes")
	})
}
