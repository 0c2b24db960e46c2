package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// Roles and workspaces (docs/guide.md#running-oncesync-for-several-teams). A principal (a signed-in
// person or an API token) has a role in every workspace (All) and
// possibly a stronger one in some (In). Every route has a rule: the role it
// needs and the sync it is about, if any. authorize is the one place that
// applies the rules.

// Role is what a principal may do; each role can do what the one before it
// can.
type Role int

// Roles, weakest first.
const (
	RoleNone     Role = iota // nothing (a workspace the principal does not see)
	RoleViewer               // read pages and the API
	RoleOperator             // run now, pause, resume, settle, re-queue, preview, test connection
	RoleAdmin                // everything, River's UI included
)

// ErrForbidden: the principal's role does not allow the action (403).
var ErrForbidden = errors.New("your role does not allow this")

// ParseRole reads "viewer", "operator" or "admin".
func ParseRole(s string) (Role, error) {
	switch s {
	case "viewer":
		return RoleViewer, nil
	case "operator":
		return RoleOperator, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("%w: unknown role %q", ErrInvalid, s)
}

func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// Access is a role in some workspaces (nil: every workspace).
type Access struct {
	Role       Role
	Workspaces []string
}

// User is a web.users entry: a password hash and its access.
type User struct {
	Hash string
	Access
}

// Token is a named API token.
type Token struct {
	Name   string
	Secret string
	Access
}

// Principal is who acts: a user or a token, by name, and what it may do.
type Principal struct {
	Name string
	// All is the role in every workspace; In raises it in some.
	All Role
	In  map[string]Role
}

// principalOf is the principal of a name with access a.
func principalOf(name string, a Access) *Principal {
	p := &Principal{Name: name}
	if a.Workspaces == nil {
		p.All = a.Role
		return p
	}
	p.In = map[string]Role{}
	for _, ws := range a.Workspaces {
		p.In[ws] = a.Role
	}
	return p
}

// RoleIn is the principal's role in workspace ws.
func (p *Principal) RoleIn(ws string) Role { return max(p.All, p.In[ws]) }

// Sees reports whether the principal sees workspace ws.
func (p *Principal) Sees(ws string) bool { return p.RoleIn(ws) >= RoleViewer }

// Top is the principal's strongest role anywhere.
func (p *Principal) Top() Role {
	r := p.All
	for _, x := range p.In {
		r = max(r, x)
	}
	return r
}

// everywhere reports whether the principal sees every workspace.
func (p *Principal) everywhere() bool { return p.All >= RoleViewer }

// encode writes the access as a session stores it: "ROLE" for every
// workspace, then "ROLE:WS" per workspace, space separated and sorted.
func (p *Principal) encode() string {
	var parts []string
	for ws, r := range p.In {
		parts = append(parts, r.String()+":"+ws)
	}
	sort.Strings(parts)
	if p.All > RoleNone || len(parts) == 0 {
		parts = append([]string{p.All.String()}, parts...)
	}
	return strings.Join(parts, " ")
}

// decodePrincipal reads what encode wrote.
func decodePrincipal(name, s string) (*Principal, error) {
	p := &Principal{Name: name}
	for _, part := range strings.Fields(s) {
		role, ws, scoped := strings.Cut(part, ":")
		if role == "none" && !scoped {
			continue
		}
		r, err := ParseRole(role)
		if err != nil {
			return nil, err
		}
		if !scoped {
			p.All = r
			continue
		}
		if p.In == nil {
			p.In = map[string]Role{}
		}
		p.In[ws] = max(p.In[ws], r)
	}
	return p, nil
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom is the request's principal; nil only on public routes.
func principalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// scope says which sync a route is about.
type scope int

const (
	scopeNone scope = iota // no one sync (lists are filtered instead)
	scopeSync              // {id} is a sync id
	scopeRun               // {id} is a run id
)

// rule is a route's access rule. The zero rule is no rule: New refuses a
// route without one (and the tests enumerate them).
type rule struct {
	public bool // no principal needed (sign-in, static files)
	need   Role
	scope  scope
}

func (r rule) set() bool { return r.public || r.need > RoleNone }

var (
	rPublic  = rule{public: true}
	rRead    = rule{need: RoleViewer}
	rAdmin   = rule{need: RoleAdmin}
	rSync    = rule{need: RoleViewer, scope: scopeSync}
	rRun     = rule{need: RoleViewer, scope: scopeRun}
	rOpSync  = rule{need: RoleOperator, scope: scopeSync}
	rOpRun   = rule{need: RoleOperator, scope: scopeRun}
	errScope = fmt.Errorf("%w: no such sync, run or record", store.ErrNotFound)
)

// authorize decides whether p may use a route with rule ru on r: nil, an
// error wrapping store.ErrNotFound (the sync or run does not exist, or is
// in a workspace p does not see: it is not revealed) or ErrForbidden.
// Admin routes without a sync (River's UI) need admin in every workspace.
func (s *Server) authorize(r *http.Request, p *Principal, ru rule) error {
	if ru.public {
		return nil
	}
	if p == nil {
		return ErrForbidden
	}
	ctx := r.Context()
	var syncID string
	switch ru.scope {
	case scopeSync:
		syncID = r.PathValue("id")
	case scopeRun:
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil || id <= 0 {
			// No run can be reached: the handler answers the bad id.
			if p.Top() < ru.need {
				return ErrForbidden
			}
			return nil
		}
		run, err := s.p.Store.GetRun(ctx, id)
		if err != nil {
			return err
		}
		// A partition's run is stored under partition.SyncID, which has
		// no sync row: it belongs to its sync (and workspace).
		syncID = partition.Parent(run.SyncID)
	case scopeNone:
		have := p.Top()
		if ru.need == RoleAdmin {
			have = p.All
		}
		if have < ru.need {
			return ErrForbidden
		}
		return nil
	}
	sy, err := s.p.Store.GetSync(ctx, syncID)
	if err != nil {
		return err
	}
	if !p.Sees(sy.Workspace) {
		return errScope
	}
	if p.RoleIn(sy.Workspace) < ru.need {
		return ErrForbidden
	}
	return nil
}

// visible keeps the items p sees, by workspace.
func visible[T any](p *Principal, items []T, workspace func(T) string) []T {
	if p == nil || p.everywhere() {
		return items
	}
	return slices.DeleteFunc(items, func(it T) bool { return !p.Sees(workspace(it)) })
}

// workspaces maps every sync id to its workspace.
func (s *Server) workspaces(ctx context.Context) (map[string]string, error) {
	all, err := s.p.Store.ListSyncs(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(all))
	for _, sy := range all {
		m[sy.ID] = sy.Workspace
	}
	return m, nil
}

// listAudit lists the newest audit entries (of syncID, or of every sync
// when "") that p sees, at most limit. Entries about no sync are for
// principals who see every workspace. For others the entries are read
// sync by sync: the newest entries of all, filtered afterwards, could be
// another workspace's only and hide p's own.
func (s *Server) listAudit(ctx context.Context, p *Principal, syncID string, limit int) ([]store.AuditEntry, error) {
	if p == nil || p.everywhere() {
		return s.p.Store.ListAudit(ctx, syncID, limit)
	}
	ws, err := s.workspaces(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.AuditEntry
	for id, w := range ws {
		if !p.Sees(w) || (syncID != "" && id != syncID) {
			continue
		}
		es, err := s.p.Store.ListAudit(ctx, id, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
