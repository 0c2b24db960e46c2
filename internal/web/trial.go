package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// A sync page's "Test connection" (POST /syncs/{id}/check: `oncesync check`)
// and "Preview" (GET /syncs/{id}/preview: `oncesync run --dry-run`). Both
// write nothing; serve provides them (Params.Check, Params.Preview).

// PreviewView is what a run would do, as the Preview page shows it.
type PreviewView struct {
	From      string // where the run would start, in words
	Read      int64
	Creates   int64
	Updates   int64
	Unchanged int64
	// Settling: sent by an earlier run, outcome not known yet.
	Settling       int64
	CreateSample   []string
	UpdateSample   []string
	SettlingSample []string
	// Rejected: the destination would refuse them before any write;
	// RejectedSample names some, each with the reason.
	Rejected       int64
	RejectedSample []string
	// Mirror: the sync removes records whose rows are gone; Removals says
	// how many a run would remove, in words.
	Mirror   bool
	Removals string
}

type checkPageData struct {
	SyncID  string
	Lines   []string
	Failure *FailureView
}

type previewPageData struct {
	SyncID  string
	P       PreviewView
	Failure *FailureView
}

// failureOf is err as the pages show a failure: its code's catalog entry
// and its detail, never the cause's text.
func (s *Server) failureOf(err error) *FailureView {
	return s.failureView(store.Run{FailureCode: string(failure.CodeOf(err)), FailureDetail: failure.Detail(err)})
}

func (s *Server) checkForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.p.Check == nil {
		s.errorPage(w, r, fmt.Errorf("%w: the connection check is not enabled on this server", ErrDisabled))
		return
	}
	if _, err := s.p.Store.GetSync(r.Context(), id); err != nil {
		s.errorPage(w, r, err)
		return
	}
	lines, err := s.p.Check(r.Context(), id)
	d := checkPageData{SyncID: id, Lines: lines}
	if err != nil {
		d.Failure = s.failureOf(err)
	}
	s.render(w, r, http.StatusOK, "check", page{Title: "Connection check of " + id, Body: d})
}

func (s *Server) previewPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.p.Preview == nil {
		s.errorPage(w, r, fmt.Errorf("%w: the preview is not enabled on this server", ErrDisabled))
		return
	}
	if _, err := s.p.Store.GetSync(r.Context(), id); err != nil {
		s.errorPage(w, r, err)
		return
	}
	p, err := s.p.Preview(r.Context(), id)
	d := previewPageData{SyncID: id, P: p}
	if err != nil {
		d.Failure = s.failureOf(err)
	}
	s.render(w, r, http.StatusOK, "preview", page{Title: "Preview of " + id, Body: d})
}

// checkFunc and previewFunc are the Params' types.
type (
	checkFunc   = func(ctx context.Context, syncID string) ([]string, error)
	previewFunc = func(ctx context.Context, syncID string) (PreviewView, error)
)
