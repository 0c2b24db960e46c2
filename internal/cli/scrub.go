package cli

import (
	"bytes"
	"io"
	"slices"
	"sync"
)

// minScrubLen is the shortest secret the output scrubber hides: a shorter
// one ("1234", "test") would also blank out ordinary words and numbers.
const minScrubLen = 8

// scrubber is the last guard between oncesync and its standard streams:
// every write to stdout or stderr has the config's secret values (API keys,
// tokens, passwords, the values of variables interpolated into them:
// config.SecretValues) replaced by "[redacted]". The packages that build
// messages already leave secrets out; this holds for a line they missed
// (docs/config.md#secrets).
type scrubber struct {
	mu      sync.RWMutex
	secrets [][]byte // longest first, so a secret inside a longer one goes with it
}

// add makes secrets (of at least minScrubLen bytes) hidden from now on; the
// ones added before stay hidden (a reloaded config may drop a key that
// earlier output could still hold).
func (s *scrubber) add(secrets []string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range secrets {
		if len(v) < minScrubLen || slices.ContainsFunc(s.secrets, func(b []byte) bool { return string(b) == v }) {
			continue
		}
		s.secrets = append(s.secrets, []byte(v))
	}
	slices.SortStableFunc(s.secrets, func(a, b []byte) int { return len(b) - len(a) })
}

// hide returns p with every secret replaced (p itself when it holds none).
func (s *scrubber) hide(p []byte) []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, sec := range s.secrets {
		if bytes.Contains(p, sec) {
			p = bytes.ReplaceAll(p, sec, []byte("[redacted]"))
		}
	}
	return p
}

// scrubWriter writes through a scrubber. A secret split between two writes
// would pass: log/slog and fmt.Fprintln write whole lines, and the tables
// and CSVs written in buffers hold no secret fields.
type scrubWriter struct {
	w io.Writer
	s *scrubber
}

func (w scrubWriter) Write(p []byte) (int, error) {
	q := w.s.hide(p)
	if _, err := w.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap is the stream written to (progress.IsTerminal looks through it).
func (w scrubWriter) Unwrap() io.Writer { return w.w }
