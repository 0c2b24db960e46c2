package fakebrevo

import (
	"net/http"
	"slices"
	"strconv"
)

// GET /v3/account (getAccount) and GET /v3/contacts/lists/{listId}
// (getList / getExtendedList): what `oncesync check` reads. The bodies carry
// the swagger's required fields; the account is a made-up one.

type accountJSON struct {
	Email       string        `json:"email"`
	FirstName   string        `json:"firstName"`
	LastName    string        `json:"lastName"`
	CompanyName string        `json:"companyName"`
	Address     addressJSON   `json:"address"`
	Plan        []accountPlan `json:"plan"`
	Relay       accountRelay  `json:"relay"`
}

type addressJSON struct {
	Street  string `json:"street"`
	City    string `json:"city"`
	ZipCode string `json:"zipCode"`
	Country string `json:"country"`
}

type accountPlan struct {
	Type        string  `json:"type"`
	Credits     float64 `json:"credits"`
	CreditsType string  `json:"creditsType"`
}

type accountRelay struct {
	Enabled bool `json:"enabled"`
	Data    struct {
		UserName string `json:"userName"`
		Relay    string `json:"relay"`
		Port     int    `json:"port"`
	} `json:"data"`
}

func (s *Server) getAccount(c *call) {
	a := accountJSON{Email: s.opts.AccountLogin, FirstName: "Fake", LastName: "Brevo", CompanyName: "oncesync fake",
		Address: addressJSON{Street: "-", City: "-", ZipCode: "-", Country: "-"},
		Plan:    []accountPlan{{Type: "free", Credits: 300, CreditsType: "sendLimit"}}}
	a.Relay.Data.UserName, a.Relay.Data.Relay, a.Relay.Data.Port = s.opts.AccountLogin, "smtp-relay.fake-brevo.invalid", 587
	s.respond(c, http.StatusOK, a)
}

type listJSON struct {
	ID                int64  `json:"id"`
	Name              string `json:"name"`
	TotalBlacklisted  int64  `json:"totalBlacklisted"`
	TotalSubscribers  int64  `json:"totalSubscribers"`
	UniqueSubscribers int64  `json:"uniqueSubscribers"`
	FolderID          int64  `json:"folderId"`
	CreatedAt         string `json:"createdAt"`
	DynamicList       bool   `json:"dynamicList"`
}

func (s *Server) getList(c *call, raw string) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 {
		s.fail(c, http.StatusBadRequest, CodeInvalidParameter, "listId must be a positive integer")
		return
	}
	if s.opts.Lists != nil && !slices.Contains(s.opts.Lists, id) {
		s.fail(c, http.StatusNotFound, CodeDocumentNotFound, "List ID does not exist")
		return
	}
	s.mu.Lock()
	n := int64(len(s.st.contacts))
	s.mu.Unlock()
	s.respond(c, http.StatusOK, listJSON{ID: id, Name: "list " + raw, TotalSubscribers: n, UniqueSubscribers: n,
		FolderID: 1, CreatedAt: "2026-01-01T00:00:00Z"})
}
