package web

import (
	"fmt"
	"slices"
)

// The sync page's chart of recent runs, drawn on the server as SVG (no
// script; the CSP stays as it is): one bar per run, oldest on the left,
// stacked by records written, replayed from the ledger and rejected, a
// failed run marked in red, and a line through the runs' durations.

const (
	chartRuns   = 30  // runs charted at most
	chartHeight = 120 // plot height in SVG units
	chartBarW   = 14
	chartGap    = 4
	chartTop    = 6 // room for the duration line's top
)

// RunChart is the data the sync page's SVG is drawn from.
type RunChart struct {
	Width, Height float64
	Bars          []ChartBar
	Duration      string // the duration line's points ("x,y x,y ...")
	MaxRecords    int64
	MaxDuration   string
}

// ChartBar is one run.
type ChartBar struct {
	RunID  int64
	X, W   float64
	Failed bool
	Segs   []ChartSeg
	Title  string
}

// ChartSeg is one stacked part of a bar.
type ChartSeg struct {
	Y, H  float64
	Class string // written, replayed, rejected, failed
}

// runChart charts runs (newest first, as the sync page lists them).
func runChart(runs []RunView) *RunChart {
	if len(runs) == 0 {
		return nil
	}
	rs := slices.Clone(runs[:min(len(runs), chartRuns)])
	slices.Reverse(rs)
	var maxRec, maxDur int64 = 1, 1
	for _, r := range rs {
		maxRec = max(maxRec, r.Written+r.Replayed+r.Rejected)
		maxDur = max(maxDur, r.DurationMS)
	}
	c := &RunChart{Width: float64(len(rs)*(chartBarW+chartGap) + chartGap), Height: chartHeight + chartTop,
		MaxRecords: maxRec, MaxDuration: durMS(maxDur)}
	base := float64(chartHeight + chartTop)
	for i, r := range rs {
		x := float64(chartGap + i*(chartBarW+chartGap))
		b := ChartBar{RunID: r.ID, X: x, W: chartBarW, Failed: r.State == "failed",
			Title: fmt.Sprintf("run %d %s: %d written, %d replayed, %d rejected, %s", r.ID, r.State, r.Written, r.Replayed, r.Rejected, durMS(r.DurationMS))}
		y := base
		for _, part := range []struct {
			n     int64
			class string
		}{{r.Written, "written"}, {r.Replayed, "replayed"}, {r.Rejected, "rejected"}} {
			if part.n == 0 {
				continue
			}
			h := max(1, float64(part.n)/float64(maxRec)*chartHeight)
			y -= h
			b.Segs = append(b.Segs, ChartSeg{Y: y, H: h, Class: part.class})
		}
		if b.Failed || len(b.Segs) == 0 {
			// A run with nothing to stack still gets its bar: a marker at
			// the base, red when it failed.
			class := "empty"
			if b.Failed {
				class = "failed"
			}
			b.Segs = append(b.Segs, ChartSeg{Y: base - 4, H: 4, Class: class})
		}
		c.Bars = append(c.Bars, b)
		dy := base - float64(r.DurationMS)/float64(maxDur)*chartHeight
		if i > 0 {
			c.Duration += " "
		}
		c.Duration += fmt.Sprintf("%.1f,%.1f", x+chartBarW/2, dy)
	}
	return c
}
