package barrier_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the child processes' TZ zones exist on any machine

	"github.com/oncesync/oncesync/internal/barrier"
)

// childEnv makes the test binary, re-executed, print the snapshot of
// childInputs and its zone instead of running tests (see TestMain).
const childEnv = "ONCESYNC_SNAPSHOT_CHILD"

// childInputs are built inside each process from the same facts, so
// anything process-local (time zone, map iteration order, the moment it
// runs) would show up in the hash. Times are built in the process's local
// zone: the same instant must hash alike wherever it is displayed.
func childInputs() map[string]any {
	instant := time.Date(2026, 3, 14, 1, 59, 26, 535897932, time.UTC)
	keys := map[string]any{}
	for i := range 200 { // big enough that iteration order differs per process
		keys[fmt.Sprintf("k%03d", i)] = i * i
	}
	return map[string]any{
		"source":        "postgres",
		"version_query": []any{int64(100000), instant.In(time.Local)},
		"max_updated":   instant.Local(),
		"local_day":     instant.In(time.Local).Truncate(24 * time.Hour),
		"ratio":         math.Pi,
		"big":           new(big.Int).Lsh(big.NewInt(1), 100),
		"nested":        map[string]any{"partitions": 4, "empty": nil, "flags": []bool{true, false}},
		"keys":          keys,
	}
}

// snapshotChild is the child's main: print "<hash> <zone offset seconds> <unix now>".
func snapshotChild() {
	h, err := barrier.Snapshot(childInputs())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, offset := time.Now().Zone()
	fmt.Printf("%s %d %d\n", h, offset, time.Now().Unix())
	os.Exit(0)
}

// TestSnapshotAcrossProcesses: processes in time zones up to 26 hours apart
// (so their local clocks read hours apart) hash the same inputs alike.
// Snapshot reads no clock at all: there is nothing for a skewed system
// clock to change, which the hash equality across local times shows.
func TestSnapshotAcrossProcesses(t *testing.T) {
	t.Parallel()
	want, err := barrier.Snapshot(childInputs())
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[int]string{}
	for _, tz := range []string{"UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago", "Asia/Kathmandu", "America/St_Johns"} {
		t.Run(tz, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			// GORACE: a -race binary otherwise sleeps 1 s at exit.
			cmd.Env = append(os.Environ(), childEnv+"=1", "TZ="+tz, "GORACE=atexit_sleep_ms=0")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			var (
				got    string
				offset int
				now    int64
			)
			if _, err := fmt.Sscan(string(out), &got, &offset, &now); err != nil {
				t.Fatalf("child output %q: %v", out, err)
			}
			loc, err := time.LoadLocation(tz)
			if err != nil {
				t.Fatal(err)
			}
			if _, wantOffset := time.Unix(now, 0).In(loc).Zone(); offset != wantOffset {
				t.Fatalf("child ran with zone offset %ds, want %ds for %s: TZ was not applied", offset, wantOffset, tz)
			}
			offsets[offset] = tz
			if got != want {
				t.Errorf("TZ=%s (UTC%+.2fh): hash %s, this process (TZ=%s) %s", tz, float64(offset)/3600, got, os.Getenv("TZ"), want)
			}
		})
	}
	if len(offsets) < 5 {
		t.Errorf("children ran in %d distinct zone offsets, want 5", len(offsets))
	}
}

func TestSnapshotFormat(t *testing.T) {
	t.Parallel()
	h, err := barrier.Snapshot(map[string]any{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Errorf("Snapshot = %q, want 64 lowercase hex digits (SHA-256)", h)
	}
	// The exact encoding of a small input, byte by byte.
	enc, err := barrier.CanonicalEncoding(map[string]any{"b": "x", "a": []any{int64(-1), true, nil, 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	want.WriteString("oncesync.checkpoint.snapshot/v1\x00")
	u64 := func(n int) string { return "\x00\x00\x00\x00\x00\x00\x00" + string(rune(n)) }
	want.WriteString("M" + u64(2))
	want.WriteString("S" + u64(1) + "a")
	want.WriteString("L" + u64(4) + "I" + u64(2) + "-1" + "T" + "N" + "D" + u64(8) + "\x3f\xe0\x00\x00\x00\x00\x00\x00")
	want.WriteString("S" + u64(1) + "b" + "S" + u64(1) + "x")
	if string(enc) != want.String() {
		t.Errorf("encoding\n got %q\nwant %q", enc, want.String())
	}
}

func TestSnapshotEquivalences(t *testing.T) {
	t.Parallel()
	instant := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	type myString string
	seven := 7
	now := time.Now() // carries a monotonic reading
	tests := []struct {
		name string
		a, b map[string]any
	}{
		{"integer kinds", map[string]any{"v": 1}, map[string]any{"v": uint8(1)}},
		{"int64 and json integer", map[string]any{"v": int64(-42)}, map[string]any{"v": json.Number("-42")}},
		{"big and json integer", map[string]any{"v": new(big.Int).Lsh(big.NewInt(1), 70)}, map[string]any{"v": json.Number("1180591620717411303424")}},
		{"float kinds", map[string]any{"v": float32(0.5)}, map[string]any{"v": 0.5}},
		{"json float", map[string]any{"v": json.Number("2.50")}, map[string]any{"v": 2.5}},
		{"negative zero", map[string]any{"v": math.Copysign(0, -1)}, map[string]any{"v": 0.0}},
		{"named string", map[string]any{"v": myString("x")}, map[string]any{"v": "x"}},
		{"pointer", map[string]any{"v": &seven}, map[string]any{"v": 7}},
		{"typed and untyped slices", map[string]any{"v": []int{1, 2}}, map[string]any{"v": []any{1, 2}}},
		{"typed and untyped maps", map[string]any{"v": map[string]int{"x": 1}}, map[string]any{"v": map[string]any{"x": 1}}},
		{"array and slice", map[string]any{"v": [2]string{"a", "b"}}, map[string]any{"v": []string{"a", "b"}}},
		{"nil and empty slice", map[string]any{"v": []int(nil)}, map[string]any{"v": []int{}}},
		{"same instant, other zone", map[string]any{"t": instant}, map[string]any{"t": instant.In(tokyo)}},
		{"monotonic reading ignored", map[string]any{"t": now}, map[string]any{"t": now.Round(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b
			ha, err := barrier.Snapshot(tt.a)
			if err != nil {
				t.Fatal(err)
			}
			hb, err := barrier.Snapshot(b)
			if err != nil {
				t.Fatal(err)
			}
			if ha != hb {
				t.Errorf("%v and %v hash differently", tt.a, b)
			}
		})
	}
}

// TestSnapshotDistinguishes: inputs that differ in type, nesting or the
// split between keys and values never share a hash.
func TestSnapshotDistinguishes(t *testing.T) {
	t.Parallel()
	inputs := []map[string]any{
		{"v": "1"}, {"v": 1}, {"v": 1.0}, {"v": true}, {"v": nil}, {"v": []any{1}}, {"v": map[string]any{}},
		{"v": []byte("1")}, {"v": []any{}}, {"v": ""}, {"v": false}, {"v": 0}, {"v": "true"}, {"v": "null"},
		{"v": time.Unix(1, 0)}, {"v": 2},
		{}, {"": ""}, {"v": []any{nil}},
		{"a": "bc"}, {"ab": "c"}, {"a": "b", "c": ""}, {"a": "b\x00c"},
		{"l": []any{"a", "b"}}, {"l": []any{"ab"}}, {"l": []any{[]any{"a"}, "b"}}, {"l": []any{"b", "a"}},
		{"a": []any{"x"}, "b": []any{}}, {"a": []any{}, "b": []any{"x"}},
		{"a": map[string]any{"b": 1}}, {"a.b": 1}, {"a": []any{map[string]any{"b": 1}}},
		{"a": map[string]any{"b": map[string]any{"c": 1}}}, {"a": map[string]any{"b": map[string]any{"c": 2}}},
	}
	seen := map[string]int{}
	for i, in := range inputs {
		h, err := barrier.Snapshot(in)
		if err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		if j, ok := seen[h]; ok {
			t.Errorf("%#v and %#v share the hash %s", inputs[j], in, h)
		}
		seen[h] = i
	}
}

func TestSnapshotRefuses(t *testing.T) {
	t.Parallel()
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	tests := []struct {
		name string
		in   map[string]any
	}{
		{"NaN", map[string]any{"v": math.NaN()}},
		{"infinity", map[string]any{"v": math.Inf(-1)}},
		{"struct", map[string]any{"v": struct{ A int }{1}}},
		{"func", map[string]any{"v": func() {}}},
		{"channel", map[string]any{"v": make(chan int)}},
		{"int map keys", map[string]any{"v": map[int]string{1: "a"}}},
		{"cycle", cyclic},
		{"bad json number", map[string]any{"v": json.Number("12x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if h, err := barrier.Snapshot(tt.in); err == nil {
				t.Errorf("Snapshot = %s, want ErrUnhashable", h)
			} else if !strings.Contains(err.Error(), barrier.ErrUnhashable.Error()) {
				t.Errorf("err = %v, want ErrUnhashable", err)
			}
		})
	}
}

func TestSnapshotJSON(t *testing.T) {
	t.Parallel()
	direct, err := barrier.Snapshot(map[string]any{"a": 1, "b": []any{"x", 2.5, nil, true}, "c": map[string]any{"d": -3}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc string
		same      bool
		wantErr   bool
	}{
		{"same content", `{"a":1,"b":["x",2.5,null,true],"c":{"d":-3}}`, true, false},
		{"keys reordered, whitespace", "{\n \"c\": {\"d\": -3},\n \"b\": [\"x\", 2.50, null, true],\n \"a\": 1\n}\n", true, false},
		{"integer written as float", `{"a":1.0,"b":["x",2.5,null,true],"c":{"d":-3}}`, false, false},
		{"integer written as string", `{"a":"1","b":["x",2.5,null,true],"c":{"d":-3}}`, false, false},
		{"not an object", `[1,2]`, false, true},
		{"null", `null`, false, true},
		{"two documents", `{"a":1} {"a":1}`, false, true},
		{"broken", `{"a":`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := barrier.SnapshotJSON(strings.NewReader(tt.doc))
			if tt.wantErr {
				if err == nil {
					t.Errorf("SnapshotJSON = %s, want an error", h)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (h == direct) != tt.same {
				t.Errorf("hash %s, direct %s: same = %v, want %v", h, direct, h == direct, tt.same)
			}
		})
	}
}
