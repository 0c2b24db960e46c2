package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Row is one scenario's result: one line of the table.
type Row struct {
	Scenario string `json:"scenario"`
	Seed     int64  `json:"seed"`
	// Runs: oncesync runs (foreground processes, or run rows in the store).
	Runs int64 `json:"runs"`
	// Kills: nemesis actions against a process (SIGKILL, SIGTERM, SIGSTOP)
	// or a service (Redis or PostgreSQL stopped).
	Kills int `json:"kills"`
	// Records: records (identities) in the sources at the end; Delivered:
	// those at the fake with every mapped value equal to the source's
	// current one; WrongValues: at the fake with some other value (a stale
	// or lost update); Lost: not at the fake at all.
	Records     int64 `json:"records"`
	Delivered   int64 `json:"delivered"`
	Lost        int64 `json:"lost"`
	WrongValues int64 `json:"wrong_values"`
	// DuplicateWrites: the fake's count of writes that changed nothing.
	DuplicateWrites int64 `json:"duplicate_writes"`
	// InDoubtSettled: in-doubt records settled by reading the destination
	// back (the store's runs.n_settled, summed).
	InDoubtSettled int64 `json:"in_doubt_settled"`
	// Resume: time from each nemesis action to the next progress (a write
	// at the fake or a cursor move) of every sync the victim held.
	Resume     []time.Duration `json:"-"`
	ResumeP50  float64         `json:"resume_p50_s"`
	ResumeP95  float64         `json:"resume_p95_s"`
	ResumeMax  float64         `json:"resume_max_s"`
	ResumeN    int             `json:"resume_samples"`
	Notes      []string        `json:"notes,omitempty"`
	Problems   []string        `json:"problems,omitempty"`
	OK         bool            `json:"ok"`
	Took       time.Duration   `json:"took_ns"`
	WorkDir    string          `json:"work_dir,omitempty"`
	Skipped    string          `json:"skipped,omitempty"`
	resumeGoal time.Duration
}

func (r *Row) notef(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *Row) problemf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// judge fills the resume percentiles and decides OK: no duplicate write, no
// lost record, no wrong final value, records to check, and no problem
// recorded by the scenario.
func (r *Row) judge() {
	if len(r.Resume) > 0 {
		d := slices.Clone(r.Resume)
		slices.Sort(d)
		r.ResumeN = len(d)
		r.ResumeP50 = pct(d, 0.50).Seconds()
		r.ResumeP95 = pct(d, 0.95).Seconds()
		r.ResumeMax = d[len(d)-1].Seconds()
		if r.resumeGoal > 0 {
			met := "met"
			if pct(d, 0.95) > r.resumeGoal {
				met = "MISSED"
			}
			r.notef("resume goal p95 <= %s: %s (p95 %.1f s over %d samples)", r.resumeGoal, met, r.ResumeP95, r.ResumeN)
		}
	}
	if r.Skipped != "" {
		r.OK = true
		return
	}
	if r.DuplicateWrites != 0 {
		r.problemf("%d duplicate writes at the destination", r.DuplicateWrites)
	}
	if r.Lost != 0 {
		r.problemf("%d of %d records lost (not at the destination)", r.Lost, r.Records)
	}
	if r.WrongValues != 0 {
		r.problemf("%d of %d records with wrong final values at the destination (not the source's current ones)", r.WrongValues, r.Records)
	}
	if r.Records == 0 {
		r.problemf("no records checked: the scenario proves nothing")
	}
	r.OK = len(r.Problems) == 0
}

// pct is the nearest-rank percentile of sorted d.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d))*p+0.999999) - 1
	return d[max(0, min(i, len(d)-1))]
}

func (r *Row) resumeText() string {
	if r.ResumeN == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs / %.1fs / %.1fs", r.ResumeP50, r.ResumeP95, r.ResumeMax)
}

func (r *Row) verdict() string {
	switch {
	case r.Skipped != "":
		return "skipped: " + r.Skipped
	case r.OK:
		return "ok"
	default:
		return "FAILED: " + strings.Join(r.Problems, "; ")
	}
}
