package fakeklaviyo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The account's standing: what Klaviyo answers every /api call once the
// private key or its account went wrong after a sync started
// (Options.Standing, --standing, and POST /_standing?state=STATE to change
// it mid-run), in the spec's error document (ClientError):
//
//   - revoked: 401 authentication_failed "Incorrect authentication
//     credentials." (the key was deleted);
//   - forbidden: 403 permission_denied "You do not have permission to
//     perform this action." (a scope removed from the key).
//
// Nothing is applied meanwhile. "" (or "ok") is good standing.
const (
	StandingOK        = ""
	StandingRevoked   = "revoked"
	StandingForbidden = "forbidden"
)

// Standings lists the standings --standing takes.
var Standings = []string{"ok", StandingRevoked, StandingForbidden}

func checkStanding(st string) (string, error) {
	if st == "ok" {
		st = StandingOK
	}
	if st != StandingOK && !slices.Contains(Standings, st) {
		return "", fmt.Errorf("fakeklaviyo: standing %q is not one of %s", st, strings.Join(Standings, ", "))
	}
	return st, nil
}

// SetStanding changes the account's standing from now on (also POST
// /_standing?state=STATE).
func (s *Server) SetStanding(st string) error {
	st, err := checkStanding(st)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.standing = st
	s.mu.Unlock()
	return nil
}

// refuseForStanding answers c as the account's standing says and reports
// whether it did.
func (s *Server) refuseForStanding(c *call) bool {
	s.mu.Lock()
	st := s.standing
	s.mu.Unlock()
	switch st {
	case StandingRevoked:
		s.fail(c, http.StatusUnauthorized, "authentication_failed", "Incorrect authentication credentials.",
			"Incorrect authentication credentials.", nil)
	case StandingForbidden:
		s.fail(c, http.StatusForbidden, "permission_denied", "You do not have permission to perform this action.",
			"You do not have permission to perform this action.", nil)
	default:
		return false
	}
	return true
}

func (s *Server) serveStanding(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if err := s.SetStanding(r.URL.Query().Get("state")); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
