package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLineBarThrottles(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	b := New(&buf, 100, "sync", time.Second).(*lineBar)
	now := time.Unix(0, 0)
	b.now = func() time.Time { return now }
	b.Set(10, "page 1")
	b.Set(20, "page 2") // same instant: throttled
	now = now.Add(2 * time.Second)
	b.Set(30, "page 3")
	b.Finish()
	got := buf.String()
	want := "sync: 10/100 records page 1\nsync: 30/100 records page 3\n" // Finish does not repeat it
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	b.Set(40, "page 4") // throttled; Finish prints it
	b.Finish()
	if want += "sync: 40/100 records page 4\n"; buf.String() != want {
		t.Fatalf("got %q want %q", buf.String(), want)
	}
	if IsTerminal(&buf) || strings.Contains(got, "\r") {
		t.Fatal("a buffer is not a terminal")
	}
}

// TestLineBarBytesBeforeTheTotal: a bar of bytes whose total is not known
// yet prints the detail alone, not "0 bytes".
func TestLineBarBytesBeforeTheTotal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	b := Open(Params{W: &buf, Desc: "s", Unit: Bytes, Interval: time.Hour}).(*lineBar)
	b.Set(0, "(page 1: 2 read)")
	b.SetTotal(73)
	b.Set(73, "(page 1: 2 read, 2 written)")
	b.Finish()
	want := "s: (page 1: 2 read)\ns: 73/73 bytes (page 1: 2 read, 2 written)\n"
	if got := buf.String(); got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

// TestLineBarBytesWithNothingToSay: a bar of bytes that never learned its
// total nor got a detail (a run that failed before its first page) prints
// no bare "desc:" line when it finishes.
func TestLineBarBytesWithNothingToSay(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	Open(Params{W: &buf, Desc: "s", Unit: Bytes, Interval: time.Hour}).Finish()
	if got := buf.String(); got != "" {
		t.Fatalf("got %q, want nothing", got)
	}
	// A count without a detail ends with its unit, not a space.
	b := New(&buf, 0, "s (dry run)", time.Hour)
	b.Set(2, "")
	b.Finish()
	if got, want := buf.String(), "s (dry run): 2 records\n"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}
