package fakeklaviyo

import (
	"fmt"
	"math/rand/v2"
	"net/http"
)

// GET /api/accounts (get_accounts), modelled on Klaviyo's API reference
// outside the embedded profiles spec: "the account(s) associated with a
// given private API key" (one), scope accounts:read, rate limits 1/s burst
// and 15/m steady. A key without that scope is answered 403
// permission_denied (Options.NoAccountsScope), as Klaviyo answers a scoped
// key outside its scopes.

// opGetAccounts is Klaviyo's operationId of GET /api/accounts.
const opGetAccounts = "get_accounts"

// newAccountID makes up an account id shaped like Klaviyo's (six letters
// and digits), so that two fakes are two accounts.
func newAccountID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 6)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

func (s *Server) getAccounts(c *call) {
	if s.opts.NoAccountsScope {
		s.fail(c, http.StatusForbidden, "permission_denied", "You do not have permission to perform this action.",
			"This API key is missing required scopes: accounts:read.", nil)
		return
	}
	id := s.opts.AccountID
	s.respond(c, http.StatusOK, map[string]any{
		"data": []any{map[string]any{
			"type": "account", "id": id,
			"attributes": map[string]any{
				"test_account": false,
				"contact_information": map[string]any{
					"default_sender_name": "oncesync fake", "default_sender_email": "owner@fake-klaviyo.invalid",
					"website_url": "https://fake-klaviyo.invalid", "organization_name": "oncesync fake",
				},
				"industry": "Software", "timezone": "UTC", "preferred_currency": "USD",
				"public_api_key": id, "locale": "en-US",
			},
			"links": map[string]any{"self": fmt.Sprintf("%s/api/accounts/%s/", c.base, id)},
		}},
		"links": map[string]any{"self": c.base + "/api/accounts/"},
	})
}
