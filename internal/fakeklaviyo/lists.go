package fakeklaviyo

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// opAddProfilesToList is Klaviyo's operationId of POST
// /api/lists/{id}/relationships/profiles.
const opAddProfilesToList = "add_profiles_to_list"

// opRemoveProfilesFromList is Klaviyo's operationId of DELETE
// /api/lists/{id}/relationships/profiles.
const opRemoveProfilesFromList = "remove_profiles_from_list"

// opGetList is Klaviyo's operationId of GET /api/lists/{id}.
const opGetList = "get_list"

// opGetListProfileIDs is Klaviyo's operationId of GET
// /api/lists/{id}/relationships/profiles.
const opGetListProfileIDs = "get_profile_ids_for_list"

// maxListAdd is Klaviyo's limit of profiles per call to add_profiles_to_list.
const maxListAdd = 1000

// modelledLimits are the rate limits of the operations the fake models
// outside the embedded spec, as Klaviyo's API reference gives them.
var modelledLimits = map[string]RateLimit{opAddProfilesToList: {Burst: 10, Steady: 150}, opRemoveProfilesFromList: {Burst: 10, Steady: 150},
	opGetList:           {Burst: 75, Steady: 700},
	opGetListProfileIDs: {Burst: 75, Steady: 700}, opGetAccounts: {Burst: 1, Steady: 15}}

// modelledOp names a request to an operation the fake models outside the
// embedded spec, or "".
func modelledOp(method string, segs []string) string {
	switch {
	case method == http.MethodPost && len(segs) == 4 && segs[0] == "lists" && segs[1] != "" &&
		segs[2] == "relationships" && segs[3] == "profiles":
		return opAddProfilesToList
	case method == http.MethodDelete && len(segs) == 4 && segs[0] == "lists" && segs[1] != "" &&
		segs[2] == "relationships" && segs[3] == "profiles":
		return opRemoveProfilesFromList
	case method == http.MethodGet && len(segs) == 1 && segs[0] == "accounts":
		return opGetAccounts
	case method == http.MethodGet && len(segs) == 2 && segs[0] == "lists" && segs[1] != "":
		return opGetList
	case method == http.MethodGet && len(segs) == 4 && segs[0] == "lists" && segs[1] != "" &&
		segs[2] == "relationships" && segs[3] == "profiles":
		return opGetListProfileIDs
	}
	return ""
}

// listProfileIDs: GET /api/lists/{id}/relationships/profiles
// (get_profile_ids_for_list), as Klaviyo's API reference gives it ("Get
// Profile IDs for List": scopes lists:read and profiles:read, rate limits
// 75/s burst and 700/m steady, a filter on email with any or equals,
// cursor pagination): the list's members among the filter's, as profile
// resource identifiers, in pages of page[size] (default 20; the fake takes
// at most 100, the reference's maximum for the profiles listing, as its own
// is not stated) with a next link. 404 when the account has no such list.
func (s *Server) listProfileIDs(c *call, list string) {
	if s.lists != nil && !s.lists[list] {
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A list with id "+list+" does not exist.", nil)
		return
	}
	q := c.r.URL.Query()
	size, offset, ok := s.page(c, 20)
	if !ok {
		return
	}
	var want map[string]bool
	if f := q.Get("filter"); f != "" {
		field, vals, ok := parseFilter(f)
		if !ok || field != "email" {
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "The filter is not supported.", map[string]any{"parameter": "filter"})
			return
		}
		want = map[string]bool{}
		for _, v := range vals {
			want[normEmail(v)] = true
		}
	}
	s.mu.Lock()
	var ids []string
	for _, p := range s.st.profiles {
		if !p.lists[list] {
			continue
		}
		if e, _ := p.attrs["email"].(string); want != nil && !want[normEmail(e)] {
			continue
		}
		ids = append(ids, p.id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	data := []map[string]any{}
	for i := offset; i < len(ids) && i < offset+size; i++ {
		data = append(data, map[string]any{"type": "profile", "id": ids[i]})
	}
	links := map[string]any{"self": c.base + c.r.URL.RequestURI()}
	if offset+size < len(ids) {
		nq := c.r.URL.Query()
		nq.Set("page[cursor]", strconv.Itoa(offset+size))
		links["next"] = c.base + "/api/lists/" + url.PathEscape(list) + "/relationships/profiles/?" + nq.Encode()
	}
	s.respond(c, http.StatusOK, map[string]any{"data": data, "links": links})
}

// getList: GET /api/lists/{id} (get_list), as Klaviyo's API reference
// gives it ("Get List": scope lists:read, rate limits 75/s burst and 700/m
// steady): the list as a JSON:API resource {type list, id, attributes
// {name, created, updated, opt_in_process}}, or 404 in Klaviyo's error
// document when the account has no such list. The fake names a list by its
// id and gives it the request's time as created and updated.
func (s *Server) getList(c *call, list string) {
	if s.lists != nil && !s.lists[list] {
		s.fail(c, http.StatusNotFound, "not_found", "Not found.", "A list with id "+list+" does not exist.", nil)
		return
	}
	created := ts(c.now)
	s.respond(c, http.StatusOK, map[string]any{"data": map[string]any{
		"type": "list", "id": list,
		"attributes": map[string]any{"name": "List " + list, "created": created, "updated": created, "opt_in_process": "single_opt_in"},
		"links":      map[string]any{"self": c.base + "/api/lists/" + url.PathEscape(list) + "/"},
	}})
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
func (s *Server) addProfilesToList(c *call, list string) { s.listMembers(c, list, true) }

// removeProfilesFromList: DELETE /api/lists/{id}/relationships/profiles
// (remove_profiles_from_list), as Klaviyo's API reference gives it
// ("Remove Profiles from List"): the same body and limits as
// add_profiles_to_list, answered 204; the profiles no longer receive the
// list's marketing, and their consent is left as it was (unlike the bulk
// unsubscribe job). Removing a profile that is not in the list changes
// nothing.
func (s *Server) removeProfilesFromList(c *call, list string) { s.listMembers(c, list, false) }

// listMembers adds (add) or removes the body's profiles to or from list.
func (s *Server) listMembers(c *call, list string, add bool) {
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
		s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "Send 1 to 1000 profiles per call.", map[string]any{"pointer": "/data"})
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
		switch p := s.st.byID[d.ID]; {
		case add && !p.lists[list]:
			p.lists[list] = true
			s.stats.ListAdditions++
		case !add && p.lists[list]:
			delete(p.lists, list)
			s.stats.ListRemovals++
		}
	}
	s.mu.Unlock()
	if !s.afterWrite(c) {
		return
	}
	s.respond(c, http.StatusNoContent, nil)
}

// page reads a listing's page[size] (1 to maxPageSize, def when absent)
// and page[cursor] (the fake's cursors are offsets); false when it
// answered 400 for them.
func (s *Server) page(c *call, def int) (size, offset int, ok bool) {
	q := c.r.URL.Query()
	size = def
	if v := q.Get("page[size]"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "page[size] must be between 1 and 100.", map[string]any{"parameter": "page[size]"})
			return 0, 0, false
		}
		size = n
	}
	if v := q.Get("page[cursor]"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(c, http.StatusBadRequest, "invalid", "Invalid input.", "page[cursor] is not a cursor of this listing.", map[string]any{"parameter": "page[cursor]"})
			return 0, 0, false
		}
		offset = n
	}
	return size, offset, true
}
