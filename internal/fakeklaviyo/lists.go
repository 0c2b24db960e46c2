package fakeklaviyo

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
)

// opAddProfilesToList is Klaviyo's operationId of POST
// /api/lists/{id}/relationships/profiles.
const opAddProfilesToList = "add_profiles_to_list"

// maxListAdd is Klaviyo's limit of profiles per call to add_profiles_to_list.
const maxListAdd = 1000

// modelledLimits are the rate limits of the operations the fake models
// outside the embedded spec, as Klaviyo's API reference gives them.
var modelledLimits = map[string]RateLimit{opAddProfilesToList: {Burst: 10, Steady: 150}}

// modelledOp names a request to an operation the fake models outside the
// embedded spec, or "".
func modelledOp(method string, segs []string) string {
	if method == http.MethodPost && len(segs) == 4 && segs[0] == "lists" && segs[1] != "" &&
		segs[2] == "relationships" && segs[3] == "profiles" {
		return opAddProfilesToList
	}
	return ""
}

// addProfilesToList: POST /api/lists/{id}/relationships/profiles
// (add_profiles_to_list). The embedded spec covers profiles only; this
// follows Klaviyo's API reference of the endpoint ("Add Profiles to List"):
// a JSON:API body {"data":[{"type":"profile","id":"..."}]} of at most 1000
// profiles, answered 204 without a body; rate limits 10/s burst and 150/m
// steady; scopes lists:write and profiles:write; a 4XX in Klaviyo's error
// document otherwise. Adding a profile already in the list changes nothing.
// What the reference leaves unsaid, the fake decides: a list that does not
// exist is 404 (as the bulk import job answers), an empty data array or an
// unknown profile id is 400 and adds no one. List membership is not a
// profile attribute: the profile's updated time is left as it was.
func (s *Server) addProfilesToList(c *call, list string) {
	var doc struct {
		Data []struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"data"`
	}
	ok := json.Unmarshal(c.body, &doc) == nil && doc.Data != nil
	for _, d := range doc.Data {
		ok = ok && d.Type == "profile" && d.ID != ""
	}
	if s.opts.Validate {
		// The body's media type, as the spec validator checks it of the
		// operations it knows (the revision header is checked for all).
		mt, _, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
		ok = ok && err == nil && mt == jsonAPI
		if !ok {
			s.mu.Lock()
			s.stats.Invalid++
			s.mu.Unlock()
		}
	}
	if !ok {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "A data array of profile resource identifiers (type profile, id) is required.",
			map[string]any{"pointer": "/data"})
		return
	}
	if len(doc.Data) == 0 || len(doc.Data) > maxListAdd {
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "Add 1 to 1000 profiles per call.", map[string]any{"pointer": "/data"})
		return
	}
	if s.lists != nil && !s.lists[list] {
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A list with id "+list+" does not exist.", nil)
		return
	}
	s.mu.Lock()
	for i, d := range doc.Data {
		if s.st.byID[d.ID] == nil {
			s.mu.Unlock()
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "A profile with id "+d.ID+" does not exist.",
				map[string]any{"pointer": fmt.Sprintf("/data/%d/id", i)})
			return
		}
	}
	for _, d := range doc.Data {
		if p := s.st.byID[d.ID]; !p.lists[list] {
			p.lists[list] = true
			s.stats.ListAdditions++
		}
	}
	s.mu.Unlock()
	if !s.afterWrite(c) {
		return
	}
	s.respond(c, http.StatusNoContent, nil)
}
