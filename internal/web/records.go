package web

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
)

// The records a person must look at (rejected, in doubt, and for a mirror
// sync removed), by identity: the sync's records page, its CSV download and
// GET /api/v1/syncs/{id}/records (as `oncesync records`). The run
// page links to the same lists narrowed to the run.

// recordsMax bounds the entries of one state read per request.
const recordsMax = 10000

// RecordList is GET /api/v1/syncs/{id}/records.
type RecordList struct {
	Records []ledger.Record `json:"records"`
	// Total counts the matching records; Records holds at most the limit.
	Total int `json:"total"`
	// Capped: there may be more than recordsMax of a state.
	Capped bool `json:"capped,omitempty"`
}

// recordFilter narrows a sync's records.
type recordFilter struct {
	State string // "", "rejected", "in_doubt", "removed" or "settled" (only when asked)
	Q     string // a case-insensitive part of the identity (or key)
	Run   int64  // 0: any run
}

// query is f as URL query parameters.
func (f recordFilter) query() string {
	v := url.Values{}
	if f.State != "" {
		v.Set("state", f.State)
	}
	if f.Q != "" {
		v.Set("q", f.Q)
	}
	if f.Run != 0 {
		v.Set("run", strconv.FormatInt(f.Run, 10))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

func filterOf(r *http.Request) (recordFilter, error) {
	q := r.URL.Query()
	f := recordFilter{State: q.Get("state"), Q: strings.TrimSpace(q.Get("q"))}
	switch f.State {
	case "", "rejected", "in_doubt", ledger.RecordRemoved, ledger.RecordSettled:
	default:
		return f, fmt.Errorf("%w: state must be rejected, in_doubt, removed or settled", ErrInvalid)
	}
	if len(f.Q) > 200 {
		return f, fmt.Errorf("%w: q is longer than 200 bytes", ErrInvalid)
	}
	if v := q.Get("run"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return f, fmt.Errorf("%w: run must be a run id", ErrInvalid)
		}
		f.Run = n
	}
	return f, nil
}

// records lists the sync's records matching f, rejected first, at most
// limit of them (Total counts them all).
func (s *Server) records(ctx context.Context, syncID string, f recordFilter, limit int) (RecordList, error) {
	sy, err := s.p.Store.GetSync(ctx, syncID)
	if err != nil {
		return RecordList{}, err
	}
	out := RecordList{Records: []ledger.Record{}}
	// add counts r when it matches f, and keeps it within limit.
	add := func(r ledger.Record) {
		if (f.Run != 0 && r.RunID != f.Run) || !r.Matches(f.Q) {
			return
		}
		out.Total++
		if len(out.Records) < limit {
			out.Records = append(out.Records, r)
		}
	}
	if f.State == ledger.RecordSettled {
		// How the writes in doubt were settled (docs/guide.md#the-ledger-and-its-retention).
		for _, lid := range ledgerIDs(sy) {
			rs, err := ledger.Settled(ctx, s.p.Store, lid, recordsMax)
			if err != nil {
				return RecordList{}, fmt.Errorf("ledger settled: %w", err)
			}
			out.Capped = out.Capped || len(rs) == recordsMax
			for _, r := range rs {
				add(r)
			}
		}
		return out, nil
	}
	states := []store.LedgerState{store.LedgerRejected, store.LedgerInDoubt}
	if mirrors(sy.Definition) {
		// A removed record is a slot's complete entry (docs/guide.md#write-modes).
		states = append(states, store.LedgerComplete)
	}
	for _, st := range states {
		name := string(st)
		if st == store.LedgerComplete {
			name = ledger.RecordRemoved
		}
		if f.State != "" && f.State != name {
			continue
		}
		var es []store.LedgerEntry
		for _, lid := range ledgerIDs(sy) { // a partitioned sync's entries are its partitions'
			part, err := ledger.List(ctx, s.p.Store, lid, st, recordsMax)
			if err != nil {
				return RecordList{}, fmt.Errorf("ledger list: %w", err)
			}
			out.Capped = out.Capped || len(part) == recordsMax
			es = append(es, part...)
		}
		for _, e := range es {
			r := ledger.RecordOf(e)
			if st == store.LedgerComplete {
				var ok bool
				if r, ok = ledger.RemovedRecord(e); !ok {
					continue
				}
			}
			add(r)
		}
	}
	return out, nil
}

// mirrors says whether a sync's stored definition has write_mode mirror
// (config.Sync.DefinitionJSON: destination.write_mode).
func mirrors(def string) bool {
	var d struct {
		Destination struct {
			WriteMode string `json:"write_mode"`
		} `json:"destination"`
	}
	return json.Unmarshal([]byte(def), &d) == nil && d.Destination.WriteMode == "mirror"
}

func (s *Server) apiRecords(w http.ResponseWriter, r *http.Request) {
	f, err := filterOf(r)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	limit, err := limitParam(r, listLimit, recordsMax)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	l, err := s.records(r.Context(), r.PathValue("id"), f, limit)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

type recordsPageData struct {
	SyncID string
	F      recordFilter
	L      RecordList
	CSVURL string
	Max    int // recordsMax: what a state's list stops at
}

func (s *Server) recordsPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f, err := filterOf(r)
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	l, err := s.records(r.Context(), id, f, listLimit)
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "records", page{Title: "Records of " + id, Body: recordsPageData{
		SyncID: id, F: f, L: l, CSVURL: "/syncs/" + url.PathEscape(id) + "/records.csv" + f.query(), Max: recordsMax,
	}})
}

// recordsCSV is the records page's download: every matching record.
func (s *Server) recordsCSV(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f, err := filterOf(r)
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	l, err := s.records(r.Context(), id, f, 2*recordsMax)
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="records.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write(ledger.RecordCSVHeader)
	for _, rec := range l.Records {
		row := rec.CSVRow()
		for i, v := range row {
			row[i] = spreadsheetText(v)
		}
		_ = cw.Write(row)
	}
	cw.Flush()
}

// spreadsheetText keeps a downloaded cell from being read as a formula by the
// spreadsheet a person opens it in: identities come from the source and
// reasons from the destination, so either may start with "=HYPERLINK(".
// OWASP's rule: a leading = + - @ tab or CR gets a quote in front.
func spreadsheetText(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}
