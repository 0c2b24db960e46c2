package web

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var pageNames = []string{"login", "overview", "sync", "run", "records", "check", "preview", "audit", "error"}

// pages are the parsed templates, one set per page (layout + page).
type pages struct{ t map[string]*template.Template }

func parsePages() (*pages, error) {
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("web: parse template %s: %w", name, err)
		}
		p.t[name] = t
	}
	return p, nil
}

func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fsrv := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}

// page is what the layout renders around a page's body.
type page struct {
	Title   string
	User    string
	CSRF    string
	Now     time.Time
	Nav     string
	Flash   string
	RiverUI bool
	Role    string
	Body    any
}

var funcs = template.FuncMap{
	"syncURL": func(id string) string { return "/syncs/" + url.PathEscape(id) },
	"every":   everyInterval,
	// syncOf is the sync a run's sync id belongs to: a partition's run is
	// stored under partition.SyncID ("contacts#p2"), whose page is its sync's.
	"syncOf": partition.Parent,
	"runURL": func(id int64) string { return "/runs/" + strconv.FormatInt(id, 10) },
	"ts": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		case *time.Time:
			if v == nil || v.IsZero() {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		return "—"
	},
	"code": codeSpans,
	"ago":  ago,
	"dur":  durMS,
	"num":  num,
	"json": func(b []byte) string { return string(b) },
	// sample names some records of a Preview count of n: ": a, b, …" ("" for none).
	"sample": func(s []string, n int64) string {
		if len(s) == 0 {
			return ""
		}
		more := ""
		if int64(len(s)) < n {
			more = ", …"
		}
		return ": " + strings.Join(s, ", ") + more
	},
}

// backticked matches the catalog's `code` spans.
var backticked = regexp.MustCompile("`([^`]+)`")

// codeSpans escapes s and renders its `code` spans (the failure catalog's
// Markdown) as <code>.
func codeSpans(s string) template.HTML {
	return template.HTML(backticked.ReplaceAllString(template.HTMLEscapeString(s), "<code>$1</code>")) //nolint:gosec // escaped first
}

// ago is t relative to now ("3 min ago", "in 2 h"); "—" for a zero time.
func ago(now time.Time, t any) string {
	var tt time.Time
	switch v := t.(type) {
	case time.Time:
		tt = v
	case *time.Time:
		if v != nil {
			tt = *v
		}
	}
	if tt.IsZero() {
		return "—"
	}
	d := now.Sub(tt)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, ""
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h", int(d.Hours()))
	default:
		s = fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	if suffix == "" {
		return "in " + s
	}
	return s + suffix
}

func durMS(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms <= 0:
		return "—"
	case d < time.Second:
		return fmt.Sprintf("%d ms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func num(v any) string {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	}
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// flashes are the fixed messages shown after an action (?done=...).
var flashes = map[string]string{
	"run_now":    "Run queued.",
	"run_joined": "A run of this sync was already queued or running: that is the run; no other was queued.",
	"resend_all": "A run that writes every record again is queued.",
	"paused":     "Sync paused.",
	"resumed":    "Sync resumed; the circuit breaker is re-armed.",
	"settled":    "In-doubt records settled.",
	"requeued":   "Dead letter re-queued.",
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if sess := sessionFrom(r.Context()); sess != nil {
		p.User, p.CSRF = sess.user, sess.csrf
		p.Role = sess.principal.Top().String()
		// River's UI shows every workspace's jobs: admins of all only.
		_, p.RiverUI = s.p.Extra["/riverui/"]
		p.RiverUI = p.RiverUI && sess.principal.All >= RoleAdmin
	}
	p.Now = s.clock.Now()
	if p.Flash == "" {
		p.Flash = flashes[r.URL.Query().Get("done")]
	}
	var buf bytes.Buffer
	if err := s.pages.t[name].Execute(&buf, p); err != nil {
		s.log.Error("web: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type errorData struct {
	Status  int
	Message string
}

func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := s.classify(r, err)
	s.render(w, r, status, "error", page{Title: http.StatusText(status), Body: errorData{Status: status, Message: msg}})
}

func (s *Server) forbidden(w http.ResponseWriter, r *http.Request, msg string) {
	s.render(w, r, http.StatusForbidden, "error", page{Title: "Forbidden", Body: errorData{Status: http.StatusForbidden, Message: msg}})
}

func (s *Server) notFoundPage(w http.ResponseWriter, r *http.Request) {
	if allow := s.allowed(r); allow != "" {
		w.Header().Set("Allow", allow)
		s.render(w, r, http.StatusMethodNotAllowed, "error", page{Title: "Method not allowed", Body: errorData{Status: http.StatusMethodNotAllowed, Message: "This address takes " + allow + " only."}})
		return
	}
	s.render(w, r, http.StatusNotFound, "error", page{Title: "Not found", Body: errorData{Status: http.StatusNotFound, Message: "There is no such page."}})
}

// classify maps an action or load error to an HTTP status and a message safe
// to show; unexpected errors are logged here, at the edge, and shown as
// "internal error".
func (s *Server) classify(r *http.Request, err error) (int, string) {
	var ee *enqueueError
	switch {
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, "your role does not allow this"
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "no such sync, run or record"
	case errors.Is(err, ErrDisabled):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, ErrConflict):
		return http.StatusConflict, err.Error()
	case errors.As(err, &ee):
		if failure.Retryable(ee.err) || failure.CodeOf(ee.err) == failure.Internal {
			s.log.Error("web: enqueue failed", "path", r.URL.Path, "err", err)
			return http.StatusServiceUnavailable, ee.Error()
		}
		return http.StatusConflict, ee.Error()
	case errors.Is(err, store.ErrUnavailable):
		s.log.Error("web: store unavailable", "path", r.URL.Path, "err", err)
		e := failure.Lookup(failure.StoreUnavailable)
		return http.StatusServiceUnavailable, e.WhatHappened + " " + e.NextStep
	default:
		s.log.Error("web: internal error", "path", r.URL.Path, "err", err)
		return http.StatusInternalServerError, "internal error"
	}
}

// Overview.

type healthCount struct {
	Health Health
	N      int
}

type workspaceGroup struct {
	Name   string
	Syncs  []SyncSummary
	Counts []healthCount
}

type overviewData struct {
	Total      int
	Shown      int
	Filter     Health
	Counts     []healthCount
	Workspaces []workspaceGroup
}

func countHealth(ss []SyncSummary) []healthCount {
	n := map[Health]int{}
	for _, s := range ss {
		n[s.Health]++
	}
	var out []healthCount
	for _, h := range healthOrder {
		if n[h] > 0 {
			out = append(out, healthCount{h, n[h]})
		}
	}
	return out
}

func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) {
	all, err := s.summaries(r.Context())
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	d := overviewData{Total: len(all), Counts: countHealth(all), Filter: Health(r.URL.Query().Get("health"))}
	var cur *workspaceGroup
	for _, sm := range all {
		if d.Filter != "" && sm.Health != d.Filter {
			continue
		}
		d.Shown++
		if cur == nil || cur.Name != sm.Workspace {
			d.Workspaces = append(d.Workspaces, workspaceGroup{Name: sm.Workspace})
			cur = &d.Workspaces[len(d.Workspaces)-1]
		}
		cur.Syncs = append(cur.Syncs, sm)
	}
	for i := range d.Workspaces {
		d.Workspaces[i].Counts = countHealth(d.Workspaces[i].Syncs)
	}
	s.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Body: d})
}

// Sync page.

type syncPageData struct {
	D          SyncDetail
	Chart      *RunChart
	CanCheck   bool
	CanPreview bool
	CanRun     bool
	CanResend  bool
	CanRequeue bool
	CanOperate bool
	Owner      string
}

func (s *Server) syncPage(w http.ResponseWriter, r *http.Request) {
	d, err := s.syncDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	op := principalFrom(r.Context()).RoleIn(d.Workspace) >= RoleOperator
	s.render(w, r, http.StatusOK, "sync", page{Title: "Sync " + d.ID, Body: syncPageData{
		D: d, Chart: runChart(d.Runs), CanOperate: op, CanCheck: op && s.p.Check != nil, CanPreview: op && s.p.Preview != nil,
		CanRun: op && s.p.Enqueue != nil && d.State == string(store.SyncActive), CanResend: op && s.p.Resend != nil && d.State == string(store.SyncActive), CanRequeue: op && s.p.Requeue != nil,
	}})
}

// Run page.

type runPageData struct {
	D          RunDetail
	Delivered  string
	Resend     string
	CanOperate bool
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.notFoundPage(w, r)
		return
	}
	d, err := s.runDetail(r.Context(), id)
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	ws := ""
	if sy, err := s.p.Store.GetSync(r.Context(), partition.Parent(d.Run.SyncID)); err == nil {
		ws = sy.Workspace
	}
	s.render(w, r, http.StatusOK, "run", page{Title: fmt.Sprintf("Run %d", id), Body: runPageData{
		D: d, Delivered: SettleDelivered, Resend: SettleResend,
		CanOperate: principalFrom(r.Context()).RoleIn(ws) >= RoleOperator,
	}})
}

// Audit page.

type auditData struct {
	SyncID  string
	Entries []AuditView
	Limit   int
}

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request) {
	syncID := r.URL.Query().Get("sync")
	es, err := s.listAudit(r.Context(), principalFrom(r.Context()), syncID, listLimit)
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	d := auditData{SyncID: syncID, Limit: listLimit}
	for _, e := range es {
		d.Entries = append(d.Entries, auditView(e))
	}
	s.render(w, r, http.StatusOK, "audit", page{Title: "Audit log", Nav: "audit", Body: d})
}

// Forms.

// actor is the form's reason; who acts is the signed-in principal
// (actions.go takes it from the request's context).
func actor(r *http.Request) ActionInput {
	return ActionInput{Why: r.PostFormValue("why")}
}

func (s *Server) runNowForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in := RunInput{ActionInput: actor(r), Resend: r.PostFormValue("resend") == "all"}
	joined, err := s.runNow(r.Context(), id, in)
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	done := "run_now"
	switch {
	case in.Resend:
		done = "resend_all"
	case joined:
		done = "run_joined"
	}
	http.Redirect(w, r, "/syncs/"+url.PathEscape(id)+"?done="+done, http.StatusSeeOther)
}

func (s *Server) pauseForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.pause(r.Context(), id, actor(r)); err != nil {
		s.errorPage(w, r, err)
		return
	}
	http.Redirect(w, r, "/syncs/"+url.PathEscape(id)+"?done=paused", http.StatusSeeOther)
}

func (s *Server) resumeForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.resume(r.Context(), id, actor(r)); err != nil {
		s.errorPage(w, r, err)
		return
	}
	http.Redirect(w, r, "/syncs/"+url.PathEscape(id)+"?done=resumed", http.StatusSeeOther)
}

func (s *Server) requeueForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.requeue(r.Context(), id, r.PathValue("dl"), actor(r)); err != nil {
		s.errorPage(w, r, err)
		return
	}
	http.Redirect(w, r, "/syncs/"+url.PathEscape(id)+"?done=requeued", http.StatusSeeOther)
}

func (s *Server) settleForm(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.notFoundPage(w, r)
		return
	}
	in := SettleInput{ActionInput: actor(r), Keys: r.PostForm["key"], Outcome: r.PostFormValue("outcome")}
	if _, err := s.settle(r.Context(), id, in); err != nil {
		s.errorPage(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/runs/%d?done=settled", id), http.StatusSeeOther)
}

// everyInterval is the interval of an @every schedule ("1h30m"), else "".
func everyInterval(schedule string) string {
	v, ok := strings.CutPrefix(strings.TrimSpace(schedule), "@every ")
	if !ok {
		return ""
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return ""
	}
	out := d.Round(time.Second).String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}
