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
	// SetTotal sets the total once it is known (<= 0: unknown).
	SetTotal(total int64)
	// Finish ends the bar on a line of its own: what follows starts on the
	// next line. The bar stays where the work got to.
	Finish()
}

// Unit is what a bar counts.
type Unit int

const (
	Records Unit = iota // records (the default)
	Bytes               // bytes of the source, shown humanized on a terminal
)

func (u Unit) String() string {
	if u == Bytes {
		return "bytes"
	}
	return "records"
}

// IsTerminal reports whether w is a terminal, looking through writers that
// wrap another (an Unwrap() io.Writer method, as the command line's secret
// scrubber has).
func IsTerminal(w io.Writer) bool {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Params describe a bar.
type Params struct {
	W     io.Writer
	Total int64 // <= 0: unknown (a spinner with the count on a terminal)
	Desc  string
	Unit  Unit
	// Interval is how often a plain line is printed when W is no terminal.
	Interval time.Duration
}

// New returns a bar of records writing to w. total <= 0 means unknown. On
// a terminal it draws a bar; elsewhere it prints a plain line at most every
// interval.
func New(w io.Writer, total int64, desc string, interval time.Duration) Bar {
	return Open(Params{W: w, Total: total, Desc: desc, Interval: interval})
}

// Open returns the bar p describes.
func Open(p Params) Bar {
	if IsTerminal(p.W) {
		return newTTYBar(p)
	}
	return &lineBar{w: p.W, desc: p.Desc, total: p.Total, unit: p.Unit, every: p.Interval, now: time.Now}
}

func newTTYBar(p Params) *ttyBar {
	total := p.Total
	if total <= 0 {
		total = -1 // progressbar's spinner
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(p.W),
		progressbar.OptionSetDescription(p.Desc),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionSetWidth(30),
	}
	if p.Unit == Bytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("records"))
	}
	return &ttyBar{w: p.W, desc: p.Desc, bar: progressbar.NewOptions64(total, opts...)}
}

type ttyBar struct {
	w    io.Writer
	desc string
	bar  *progressbar.ProgressBar
}

func (b *ttyBar) Set(n int64, detail string) {
	if detail != "" {
		b.bar.Describe(b.desc + " " + detail)
	}
	_ = b.bar.Set64(n)
}

func (b *ttyBar) SetTotal(total int64) {
	if total <= 0 {
		total = -1
	}
	if total != b.bar.GetMax64() {
		b.bar.ChangeMax64(total)
	}
}

func (b *ttyBar) Finish() {
	_ = b.bar.Add64(0) // draw the last Set, however soon after the one before
	_ = b.bar.Exit()
	fmt.Fprintln(b.w)
}

type lineBar struct {
	w     io.Writer
	desc  string
	total int64
	unit  Unit
	every time.Duration
	last  time.Time
	n     int64
	info  string
	now   func() time.Time
	shown string // the last line printed
}

func (b *lineBar) Set(n int64, detail string) {
	b.n, b.info = n, detail
	if t := b.now(); t.Sub(b.last) >= b.every {
		b.last = t
		b.print()
	}
}

func (b *lineBar) SetTotal(total int64) { b.total = total }

func (b *lineBar) print() {
	if line := b.line(); line != "" {
		b.shown = line
		fmt.Fprint(b.w, line)
	}
}

func (b *lineBar) line() string {
	info := b.info
	if info != "" {
		info = " " + info
	}
	switch {
	case b.total > 0:
		return fmt.Sprintf("%s: %d/%d %s%s\n", b.desc, b.n, b.total, b.unit, info)
	case b.unit == Bytes:
		// The source's size is not known yet (the first page, before its
		// position is read): "0 bytes" would say nothing was read. With no
		// detail either (a run that failed before its first page), a bare
		// "desc:" would say nothing at all.
		if b.info != "" {
			return fmt.Sprintf("%s: %s\n", b.desc, b.info)
		}
		return ""
	default:
		return fmt.Sprintf("%s: %d %s%s\n", b.desc, b.n, b.unit, info)
	}
}

// Finish prints the last Set, unless it is the line printed last.
func (b *lineBar) Finish() {
	if b.line() != b.shown {
		b.print()
	}
}
