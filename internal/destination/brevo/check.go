package brevo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

var _ destination.Checker = (*Destination)(nil)

// Check reads the account (GET /account: the api key works), each list
// the sync adds contacts to (GET /contacts/lists/{listId}: it exists in
// this account) and the account's contact attributes (each mapped one
// exists: attributes.go). Nothing is written.
func (d *Destination) Check(ctx context.Context) ([]string, error) {
	if _, err := d.do(ctx, request{method: http.MethodGet, path: "/account", route: "GET /account"}); err != nil {
		return nil, d.checkFailure("read the account", err)
	}
	checked := []string{"brevo: the api key is accepted (GET /account)"}
	for _, id := range d.listIDs {
		s := strconv.FormatInt(id, 10)
		_, err := d.do(ctx, request{method: http.MethodGet, path: "/contacts/lists/" + s, route: "GET /contacts/lists/{listId}"})
		var ae *APIError
		if errors.As(err, &ae) && ae.says(http.StatusNotFound) {
			return checked, failure.New(failure.InvalidSyncDefinition,
				fmt.Sprintf("brevo list %d does not exist in this account: fix destination.list_ids (Brevo: Contacts > Lists shows each list's id)", id))
		}
		if err != nil {
			return checked, d.checkFailure("read list "+s, err)
		}
		checked = append(checked, fmt.Sprintf("brevo: list %d exists", id))
	}
	if len(d.attrs) == 0 {
		return checked, nil
	}
	attrs, listed, err := d.accountAttributes(ctx)
	switch {
	case err != nil:
		return checked, d.checkFailure("read the contact attributes", err)
	case !listed:
		return append(checked, destination.NotChecked+"brevo: the account's contact attributes could not be listed ("+attributesRoute+"): mapping.attributes not checked"), nil
	}
	if err := d.attributeProblem(attrs); err != nil {
		return checked, err
	}
	named := make([]string, len(d.attrs))
	for i, n := range d.attrs {
		named[i] = n
		a := attrs[strings.ToUpper(n)]
		switch {
		case a.hasOptions():
			// Its values are sent as these numbers (categoryValue).
			named[i] += " (category: " + optionList(a.options) + ")"
		case a.typ != "":
			named[i] += " (" + a.typ + ")"
		}
	}
	checked = append(checked, "brevo: mapped attributes exist: "+strings.Join(named, ", "))
	for _, n := range d.attrs {
		if a := attrs[strings.ToUpper(n)]; !knownType(a) {
			checked = append(checked, destination.NotChecked+unconvertedType(n, a.typ))
		}
	}
	return checked, nil
}

// knownType reports whether oncesync knows how Brevo keeps a's values:
// the types swagger.yaml's getAttributes lists, and category attributes.
func knownType(a attribute) bool {
	switch a.typ {
	case "", "text", "date", "float", "boolean", "id":
		return true
	}
	return a.category == categoryCategory
}

// unconvertedType tells that the values of attribute name, of a type
// oncesync does not know, are sent as mapped, where Brevo drops a value
// not of its attribute's type without an error. A multiple-choice
// attribute (createAttribute's multiCategoryOptions) holds a list of its
// options, as createContact's example COUNTRIES: ["India","China"].
func unconvertedType(name, typ string) string {
	msg := fmt.Sprintf("brevo: attribute %s has type %s, whose values oncesync sends as mapped without checking them; Brevo drops a value not of its attribute's type without an error",
		strings.ToUpper(name), typ)
	if typ == "multiple-choice" {
		msg += " (it takes a list of its options: map a column holding a JSON array, such as [\"USA\",\"INDIA\"])"
	}
	return msg
}

// checkFailure gives a check's error its code: the shared HTTP layer's
// (auth, unavailable, rate limited) as they are, any other answer as the
// destination being unusable.
func (d *Destination) checkFailure(what string, err error) error {
	if failure.CodeOf(err) != failure.Internal {
		return err
	}
	if ae, ok := err.(*APIError); ok && !ae.Brevos {
		// A base_url without /v3 answers "404 page not found": as a run
		// says it (verifyError), not "could not read the account".
		return d.verifyError(err)
	}
	return failure.Wrap(failure.DestinationUnavailable, d.safe(err), "brevo: could not %s", what)
}

var _ destination.AccountTeller = (*Destination)(nil)

// AccountID is the account the api key reaches (GET /account): its
// organization_id where Brevo sends one, else its login e-mail, which no two
// accounts share. The runner keeps only a digest of it.
func (d *Destination) AccountID(ctx context.Context) (string, error) {
	res, err := d.do(ctx, request{method: http.MethodGet, path: "/account", route: "GET /account"})
	var ae *APIError
	switch {
	case err == nil:
	case failure.CodeOf(err) != failure.Internal:
		return "", err // a refused key, an unavailable Brevo: its code says which
	case errors.As(err, &ae):
		return "", destination.ErrNoAccountID // a 4xx of this route: Brevo will not say
	default:
		return "", d.checkFailure("read the account", err)
	}
	var a struct {
		OrganizationID json.RawMessage `json:"organization_id"` // a string or a number
		Email          string          `json:"email"`
	}
	if json.Unmarshal(res.body, &a) != nil {
		return "", destination.ErrNoAccountID
	}
	org := strings.Trim(string(a.OrganizationID), `"`)
	switch {
	case org != "" && org != "null":
		return "brevo organization " + org, nil
	case a.Email != "":
		return "brevo login " + strings.ToLower(a.Email), nil
	}
	return "", destination.ErrNoAccountID
}
