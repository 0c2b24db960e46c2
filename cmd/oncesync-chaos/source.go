package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// csvSource is one sync's CSV file. It only grows: rows are appended by
// writing the whole new content to a temporary file and renaming it over the
// old one, so a reader never sees half a row and a reader with the file open
// keeps reading the old, shorter content (a prefix of the new one, which is
// what the file cursor's checksum expects).
type csvSource struct {
	syncID string
	path   string
	mode   string // bulk | single

	mu       sync.Mutex
	content  []byte
	n        int // rows
	verified int // rows 1..verified are known delivered (contacts never disappear)
}

func newCSVSource(dir, syncID, mode string, rows int) (*csvSource, error) {
	s := &csvSource{syncID: syncID, path: filepath.Join(dir, syncID+".csv"), mode: mode,
		content: []byte("id,email,first_name\n")}
	return s, s.append(rows)
}

func (s *csvSource) email(i int) string { return fmt.Sprintf("%s-%07d@example.com", s.syncID, i) }

func firstName(i int) string { return "First" + strconv.Itoa(i) }

// append adds n rows.
func (s *csvSource) append(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := s.content
	for i := s.n + 1; i <= s.n+n; i++ {
		buf = fmt.Appendf(buf, "%d,%s,%s\n", i, s.email(i), firstName(i))
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return err
	}
	s.content, s.n = buf, s.n+n
	return nil
}

func (s *csvSource) rows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// delivered reports whether row i is at the fake with its attributes.
func (s *csvSource) delivered(fake *fakebrevo.Server, i int) bool {
	c, ok := fake.Contact(s.email(i))
	return ok && fmt.Sprint(c.Attributes["FIRSTNAME"]) == firstName(i)
}

// caughtUp reports whether every row is delivered, checking only rows past
// the delivered prefix already seen.
func (s *csvSource) caughtUp(fake *fakebrevo.Server) bool {
	s.mu.Lock()
	n, v := s.n, s.verified
	s.mu.Unlock()
	for v < n && s.delivered(fake, v+1) {
		v++
	}
	s.mu.Lock()
	s.verified = max(s.verified, v)
	s.mu.Unlock()
	return v >= n
}

// check counts delivered and lost rows, every row checked.
func (s *csvSource) check(fake *fakebrevo.Server) (delivered, lost int64) {
	n := s.rows()
	for i := 1; i <= n; i++ {
		if s.delivered(fake, i) {
			delivered++
		} else {
			lost++
		}
	}
	return delivered, lost
}
