package fakebrevo

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The account's standing: what Brevo answers every API call of an account
// that went wrong after a sync started (Options.Standing, --standing, and
// POST /_standing?state=STATE to change it mid-run). Each answer is the
// swagger's errorModel with a code of its enum:
//
//   - revoked: 401 unauthorized "Key not found", as for an unknown key (the
//     key was deleted or regenerated);
//   - no-credits: 402 not_enough_credits, with the swagger's own 402 text
//     ("You don't have enough credit ... Please update your plan");
//   - forbidden: 403 permission_denied "Access forbidden." (the swagger's
//     example: a key or an account without the permission);
//   - unvalidated: 403 account_under_validation (an account Brevo holds for
//     review; the code is in the enum, the status is the fake's choice).
//
// Reads and writes alike are refused and nothing is applied, as an account
// refusal comes before any processing. "" (or "ok") is good standing.
const (
	StandingOK          = ""
	StandingRevoked     = "revoked"
	StandingNoCredits   = "no-credits"
	StandingForbidden   = "forbidden"
	StandingUnvalidated = "unvalidated"
)

// Standings lists the standings --standing takes.
var Standings = []string{"ok", StandingRevoked, StandingNoCredits, StandingForbidden, StandingUnvalidated}

// standingAnswer is the answer to every API call of an account in standing
// st; status 0 means good standing.
func standingAnswer(st string) (status int, code, message string) {
	switch st {
	case StandingRevoked:
		return http.StatusUnauthorized, CodeUnauthorized, msgUnauthorized
	case StandingNoCredits:
		return http.StatusPaymentRequired, "not_enough_credits", "You don't have enough credit to perform this action. Please update your plan"
	case StandingForbidden:
		return http.StatusForbidden, "permission_denied", "Access forbidden."
	case StandingUnvalidated:
		return http.StatusForbidden, "account_under_validation", "Your account is under validation."
	}
	return 0, "", ""
}

// checkStanding returns st as stored ("ok" is ""), or an error naming the
// standings.
func checkStanding(st string) (string, error) {
	if st == "ok" {
		st = StandingOK
	}
	if st != StandingOK && !slices.Contains(Standings, st) {
		return "", fmt.Errorf("%w: standing %q is not one of %s", ErrBadOptions, st, strings.Join(Standings, ", "))
	}
	return st, nil
}

// SetStanding changes the account's standing from now on (also POST
// /_standing?state=STATE): a key revoked, credits spent or permissions
// removed mid-run, and restored.
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

func (s *Server) serveStanding(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		st := s.standing
		s.mu.Unlock()
		if st == "" {
			st = "ok"
		}
		writeJSON(w, http.StatusOK, map[string]string{"state": st})
	case http.MethodPost:
		if err := s.SetStanding(r.URL.Query().Get("state")); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{Code: CodeInvalidParameter, Message: err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Code: CodeMethodNotAllowed, Message: "use GET or POST"})
	}
}
