package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// chaosSource is one sync's source as the runner sees it: it grows it,
// changes rows and changes them back, and checks the destination against
// its current values.
type chaosSource interface {
	// syncID is the sync reading this source.
	syncID() string
	// mode is the sync's write path (bulk or single).
	mode() string
	// rows is the number of records (identities) now.
	rows() int
	// grow appends n new records.
	grow(ctx context.Context, n int) error
	// flip changes k records and changes back the ones changed two steps
	// ago (a no-op for sources that cannot change rows in place).
	flip(ctx context.Context, e *env, k int) error
	// unflip changes back every record still changed.
	unflip(ctx context.Context) error
	// caughtUp reports whether the destination holds every record's current
	// values.
	caughtUp(ctx context.Context, fake *fakebrevo.Server) bool
	// check is the value checker over every record.
	check(ctx context.Context, fake *fakebrevo.Server) valueCounts
	// yaml is the sync's source and mapping lines of the config.
	yaml(pageSize int) string
}

// csvSource is one sync's CSV file. It only grows: rows are appended by
// writing the whole new content to a temporary file and renaming it over the
// old one, so a reader never sees half a row and a reader with the file open
// keeps reading the old, shorter content (a prefix of the new one, which is
// what the file cursor's checksum expects).
//
// A CSV cannot change a row in place without breaking every saved cursor
// (the file cursor checks the bytes before it), so a record changes by a
// later line with the same identity: the record's current value is its last
// line's, and a run that reads the file in order ends with it.
type csvSource struct {
	id     string
	path   string
	wmode  string // bulk | single
	mapExt bool   // ext_id is mapped (single path only: finding 3)

	mu       sync.Mutex
	content  []byte
	n        int          // identities 1..n
	changed  map[int]bool // identities whose last line says Changed<i>
	flipped  map[int]bool // identities that ever had a second line
	verified int          // unflipped identities 1..verified are known delivered
}

func newCSVSource(dir, syncID, mode string, rows int) (*csvSource, error) {
	s := &csvSource{id: syncID, path: filepath.Join(dir, syncID+".csv"), wmode: mode, mapExt: mode == "single",
		content: []byte("id,email,first_name,ext_id\n"), changed: map[int]bool{}, flipped: map[int]bool{}}
	return s, s.grow(context.Background(), rows)
}

func (s *csvSource) syncID() string { return s.id }
func (s *csvSource) mode() string   { return s.wmode }

func (s *csvSource) email(i int) string { return fmt.Sprintf("%s-%07d@example.com", s.id, i) }

func firstName(i int) string   { return "First" + strconv.Itoa(i) }
func changedName(i int) string { return "Changed" + strconv.Itoa(i) }

// extID is record i's ext_id: unique across syncs, as Brevo wants.
func extID(syncID string, i int) string { return syncID + "-x" + strconv.Itoa(i) }

func (s *csvSource) yaml(pageSize int) string {
	ext := ""
	if s.mapExt {
		ext = "ext_id: ext_id, "
	}
	return fmt.Sprintf(`    source: {type: csv, path: %s, page_size: %d, identity: id}
    mapping: {email: email, %sattributes: {FIRSTNAME: first_name}}
`, filepath.Base(s.path), pageSize, ext)
}

// writeLocked appends lines and renames the new content over the file.
func (s *csvSource) writeLocked(buf []byte) error {
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return err
	}
	s.content = buf
	return nil
}

func (s *csvSource) line(buf []byte, i int, name string) []byte {
	return fmt.Appendf(buf, "%d,%s,%s,%s\n", i, s.email(i), name, extID(s.id, i))
}

func (s *csvSource) grow(_ context.Context, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := s.content
	for i := s.n + 1; i <= s.n+n; i++ {
		buf = s.line(buf, i, firstName(i))
	}
	if err := s.writeLocked(buf); err != nil {
		return err
	}
	s.n += n
	return nil
}

// appendVersions appends a line for each of ids: Changed<i> when changed,
// else First<i> again (the change back).
func (s *csvSource) appendVersions(ids []int, changed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := s.content
	for _, i := range ids {
		name := firstName(i)
		if changed {
			name = changedName(i)
		}
		buf = s.line(buf, i, name)
	}
	if err := s.writeLocked(buf); err != nil {
		return err
	}
	for _, i := range ids {
		s.flipped[i] = true
		s.changed[i] = changed
	}
	return nil
}

// flip is a no-op: the cluster scenarios change rows in PostgreSQL tables
// (pgSource); a CSV re-read from its start on every run would replay a
// change log and flap the destination between versions mid-pass. The
// foreground scenarios append versions between runs (appendVersions) and
// check after one last pass.
func (s *csvSource) flip(context.Context, *env, int) error { return nil }
func (s *csvSource) unflip(context.Context) error          { return nil }

func (s *csvSource) rows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *csvSource) want(i int) want {
	w := want{Email: s.email(i), First: firstName(i), Flipped: s.flipped[i], Label: s.id + " id " + strconv.Itoa(i)}
	if s.changed[i] {
		w.First = changedName(i)
	}
	if s.mapExt {
		w.ExtID = extID(s.id, i)
	}
	return w
}

// caughtUp reports whether every record is delivered with its values,
// checking only records past the delivered prefix already seen (and every
// flipped one).
func (s *csvSource) caughtUp(_ context.Context, fake *fakebrevo.Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.flipped {
		var v valueCounts
		if v.compare(fake, s.want(i)); v.Delivered != 1 {
			return false
		}
	}
	for s.verified < s.n {
		var v valueCounts
		if v.compare(fake, s.want(s.verified+1)); v.Delivered != 1 {
			return false
		}
		s.verified++
	}
	return true
}

// check is the value checker over every record.
func (s *csvSource) check(_ context.Context, fake *fakebrevo.Server) valueCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	var v valueCounts
	for i := 1; i <= s.n; i++ {
		v.compare(fake, s.want(i))
	}
	return v
}

// pickIDs picks k distinct identities in [lo, hi] (seeded), sorted.
func pickIDs(e *env, lo, hi, k int) []int {
	seen := map[int]bool{}
	for len(seen) < min(k, hi-lo+1) {
		seen[lo+e.intN(hi-lo+1)] = true
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}
