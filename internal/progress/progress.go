// Package progress shows long work: a progress bar on a terminal, plain
// throttled lines otherwise (logs, CI, pipes).
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar reports a count towards an optional total.
type Bar interface {
	// Set moves the bar to n and replaces the detail text.
	Set(n int64, detail string)
	// Finish ends the bar (a final newline on a terminal).
	Finish()
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a bar writing to w. total <= 0 means unknown. On a terminal it
// draws a bar; elsewhere it prints a plain line at most every interval.
func New(w io.Writer, total int64, desc string, interval time.Duration) Bar {
	if IsTerminal(w) {
		return &ttyBar{bar: progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("records"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)}
	}
	return &lineBar{w: w, desc: desc, total: total, every: interval, now: time.Now}
}

type ttyBar struct{ bar *progressbar.ProgressBar }

func (b *ttyBar) Set(n int64, detail string) {
	if detail != "" {
		b.bar.Describe(detail)
	}
	_ = b.bar.Set64(n)
}

func (b *ttyBar) Finish() { _ = b.bar.Finish() }

type lineBar struct {
	w     io.Writer
	desc  string
	total int64
	every time.Duration
	last  time.Time
	n     int64
	info  string
	now   func() time.Time
}

func (b *lineBar) Set(n int64, detail string) {
	b.n, b.info = n, detail
	if t := b.now(); t.Sub(b.last) >= b.every {
		b.last = t
		b.print()
	}
}

func (b *lineBar) print() {
	if b.total > 0 {
		fmt.Fprintf(b.w, "%s: %d/%d records %s\n", b.desc, b.n, b.total, b.info)
		return
	}
	fmt.Fprintf(b.w, "%s: %d records %s\n", b.desc, b.n, b.info)
}

func (b *lineBar) Finish() { b.print() }
