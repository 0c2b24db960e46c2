package web

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/partition"
)

// openapiJSON documents /api/v1 (served at /api/v1/openapi.json; the tests
// validate every API request and response against it).
//
//go:embed openapi.json
var openapiJSON []byte

// APIError is the body of every API error response.
type APIError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		http.Error(w, `{"error":"internal_error","message":"internal error"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, APIError{Error: code, Message: msg})
}

var statusCodes = map[int]string{
	http.StatusBadRequest:          "invalid_request",
	http.StatusUnauthorized:        "unauthorized",
	http.StatusForbidden:           "forbidden",
	http.StatusNotFound:            "not_found",
	http.StatusConflict:            "conflict",
	http.StatusServiceUnavailable:  "unavailable",
	http.StatusInternalServerError: "internal_error",
}

func (s *Server) apiFail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := s.classify(r, err)
	writeAPIError(w, status, statusCodes[status], msg)
}

// decode reads a JSON body into v; unknown fields are refused.
func decode(r *http.Request, v any) error { return decodeBody(r, v, false) }

// decodeBody is decode, where optional accepts an empty body (v stays as
// it is).
func decodeBody(r *http.Request, v any, optional bool) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			if optional {
				return nil
			}
			return fmt.Errorf("%w: a JSON body is required", ErrInvalid)
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			// Valid JSON with a key the action does not take ("reason"
			// where it takes "why"): say which.
			return fmt.Errorf("%w: this action takes no field %s (its fields: /api/v1/openapi.json)", ErrInvalid, field)
		}
		return fmt.Errorf("%w: the body is not valid JSON for this action", ErrInvalid)
	}
	if dec.More() {
		return fmt.Errorf("%w: one JSON object expected", ErrInvalid)
	}
	return nil
}

func (s *Server) openapiDoc(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiJSON)
}

func (s *Server) apiNotFound(w http.ResponseWriter, r *http.Request) {
	if allow := s.allowed(r); allow != "" {
		w.Header().Set("Allow", allow)
		writeAPIError(w, http.StatusMethodNotAllowed, "method_not_allowed", "this route takes "+allow)
		return
	}
	writeAPIError(w, http.StatusNotFound, "not_found", "no such API route")
}

// SyncList is GET /api/v1/syncs.
type SyncList struct {
	Syncs []SyncSummary `json:"syncs"`
}

func (s *Server) apiSyncs(w http.ResponseWriter, r *http.Request) {
	all, err := s.summaries(r.Context())
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	if all == nil {
		all = []SyncSummary{}
	}
	writeJSON(w, http.StatusOK, SyncList{Syncs: all})
}

func (s *Server) apiSync(w http.ResponseWriter, r *http.Request) {
	d, err := s.syncDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// RunList is GET /api/v1/syncs/{id}/runs.
type RunList struct {
	Runs []RunView `json:"runs"`
}

// limitParam reads ?limit= (1..max, default def).
func limitParam(r *http.Request, def, maxN int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxN {
		return 0, fmt.Errorf("%w: limit must be a number from 1 to %d", ErrInvalid, maxN)
	}
	return n, nil
}

func (s *Server) apiSyncRuns(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	limit, err := limitParam(r, 50, listLimit)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	sy, err := s.p.Store.GetSync(r.Context(), id)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	runs, err := s.p.Store.ListRuns(r.Context(), id, limit)
	if err == nil {
		runs, err = partition.SoFar(r.Context(), s.p.Store, runs, definitionPartitions(sy.Definition))
	}
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	out := RunList{Runs: make([]RunView, 0, len(runs))}
	for _, run := range runs {
		out.Runs = append(out.Runs, s.runView(run))
	}
	writeJSON(w, http.StatusOK, out)
}

func runIDParam(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: run id must be a positive number", ErrInvalid)
	}
	return id, nil
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request) {
	id, err := runIDParam(r)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	d, err := s.runDetail(r.Context(), id)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// AuditList is GET /api/v1/audit.
type AuditList struct {
	Entries []AuditView `json:"entries"`
}

func (s *Server) apiAudit(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r, 100, listLimit)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	es, err := s.listAudit(r.Context(), principalFrom(r.Context()), r.URL.Query().Get("sync"), limit)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	out := AuditList{Entries: make([]AuditView, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, auditView(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// Accepted answers actions that queue work.
type Accepted struct {
	SyncID string `json:"sync_id"`
	Status string `json:"status"`
}

func (s *Server) apiRunNow(w http.ResponseWriter, r *http.Request) {
	// A run needs no reason, so the body is optional: `curl -X POST` works.
	var in RunInput
	if err := decodeBody(r, &in, true); err != nil {
		s.apiFail(w, r, err)
		return
	}
	id := r.PathValue("id")
	joined, err := s.runNow(r.Context(), id, in)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	status := "queued"
	if joined {
		status = "already_queued"
	}
	writeJSON(w, http.StatusAccepted, Accepted{SyncID: id, Status: status})
}

func (s *Server) apiPause(w http.ResponseWriter, r *http.Request) {
	var in ActionInput
	if err := decode(r, &in); err != nil {
		s.apiFail(w, r, err)
		return
	}
	id := r.PathValue("id")
	if _, err := s.pause(r.Context(), id, in); err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.apiSync(w, r)
}

func (s *Server) apiResume(w http.ResponseWriter, r *http.Request) {
	var in ActionInput
	if err := decode(r, &in); err != nil {
		s.apiFail(w, r, err)
		return
	}
	if _, err := s.resume(r.Context(), r.PathValue("id"), in); err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.apiSync(w, r)
}

func (s *Server) apiRequeue(w http.ResponseWriter, r *http.Request) {
	var in ActionInput
	if err := decode(r, &in); err != nil {
		s.apiFail(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.requeue(r.Context(), id, r.PathValue("dl"), in); err != nil {
		s.apiFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, Accepted{SyncID: id, Status: "requeued"})
}

// Settled answers POST /api/v1/runs/{id}/settle.
type Settled struct {
	RunID   int64  `json:"run_id"`
	Outcome string `json:"outcome"`
	Settled int    `json:"settled"`
}

func (s *Server) apiSettle(w http.ResponseWriter, r *http.Request) {
	id, err := runIDParam(r)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	var in SettleInput
	if err := decode(r, &in); err != nil {
		s.apiFail(w, r, err)
		return
	}
	n, err := s.settle(r.Context(), id, in)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Settled{RunID: id, Outcome: in.Outcome, Settled: n})
}
