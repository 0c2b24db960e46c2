package fakehubspot

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The account's standing: what HubSpot answers every API call once the
// private app or the account went wrong after a sync started
// (Options.Standing, --standing, and POST /_standing?state=STATE to change
// it mid-run), in HubSpot's error JSON:
//
//   - revoked: 401 INVALID_AUTHENTICATION, as for an unknown token (the
//     app's token rotated or the app uninstalled);
//   - forbidden: 403 MISSING_SCOPES ("This app hasn't been granted all
//     required scopes to make this call."), a scope removed from the app;
//   - daily: 429 with errorType RATE_LIMIT and policyName DAILY ("You have
//     reached your daily limit."), the account's daily request limit spent:
//     HubSpot sends no Retry-After, the limit resets at midnight in the
//     account's time zone.
//
// Nothing is applied meanwhile. "" (or "ok") is good standing.
const (
	StandingOK        = ""
	StandingRevoked   = "revoked"
	StandingForbidden = "forbidden"
	StandingDaily     = "daily"
)

// Standings lists the standings --standing takes.
var Standings = []string{"ok", StandingRevoked, StandingForbidden, StandingDaily}

func checkStanding(st string) (string, error) {
	if st == "ok" {
		st = StandingOK
	}
	if st != StandingOK && !slices.Contains(Standings, st) {
		return "", fmt.Errorf("fakehubspot: standing %q is not one of %s", st, strings.Join(Standings, ", "))
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

// refuseForStanding answers r as the account's standing says and reports
// whether it did.
func (s *Server) refuseForStanding(w http.ResponseWriter) bool {
	s.mu.Lock()
	st := s.standing
	s.mu.Unlock()
	switch st {
	case StandingRevoked:
		s.error(w, http.StatusUnauthorized, "INVALID_AUTHENTICATION",
			"Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview", nil)
	case StandingForbidden:
		s.error(w, http.StatusForbidden, "MISSING_SCOPES",
			"This app hasn't been granted all required scopes to make this call. Read more about required scopes here: https://developers.hubspot.com/scopes.",
			map[string]any{"requiredGranularScopes": []string{"crm.objects.contacts.write"}})
	case StandingDaily:
		w.Header().Set("Content-Type", "application/json;charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": "error", "message": "You have reached your daily limit.",
			"errorType": "RATE_LIMIT", "correlationId": newID(), "policyName": "DAILY", "requestId": newID(),
		})
	default:
		return false
	}
	return true
}

func (s *Server) serveStanding(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.error(w, http.StatusMethodNotAllowed, "VALIDATION_ERROR", "use POST", nil)
		return
	}
	if err := s.SetStanding(r.URL.Query().Get("state")); err != nil {
		s.error(w, http.StatusBadRequest, "VALIDATION_ERROR", err.Error(), nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
