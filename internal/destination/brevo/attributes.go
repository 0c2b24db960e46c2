package brevo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/oncesync/oncesync/internal/failure"
)

// Brevo keeps only the contact attributes an account defines: a write that
// names another is answered as a success, without it ("Any contact attribute
// that doesn't exist in your account will be ignored at import end"; a single
// create or update does the same). A mapped attribute the account lacks
// would lose every value written to it, without a single error, so `oncesync
// check` and each run that writes read the account's attributes first
// (GET /contacts/attributes) and refuse such a mapping
// (docs/guide.md#brevo-attributes).

// attributesRoute is the account's attribute list.
const attributesRoute = "GET /contacts/attributes"

// readOnlyCategories are attribute categories Brevo computes itself.
var readOnlyCategories = []string{"calculated", "global"}

// accountAttributes reads the account's attributes: category by upper-case
// name. listed is false when the list could not be had in Brevo's shape (a
// Brevo-compatible server without the endpoint): nothing can be checked.
func (d *Destination) accountAttributes(ctx context.Context) (cats map[string]string, listed bool, err error) {
	resp, err := d.do(ctx, request{method: http.MethodGet, path: "/contacts/attributes", route: attributesRoute})
	var ae *APIError
	switch {
	case err == nil:
	case failure.CodeOf(err) != failure.Internal:
		return nil, false, err // auth, unavailable, rate limited: as for any call
	case errors.As(err, &ae):
		return nil, false, nil // not there (404, 405...): nothing to check against
	default:
		return nil, false, err
	}
	var body struct {
		Attributes *[]struct {
			Name     string `json:"name"`
			Category string `json:"category"`
		} `json:"attributes"`
	}
	if json.Unmarshal(resp.body, &body) != nil || body.Attributes == nil {
		return nil, false, nil
	}
	cats = make(map[string]string, len(*body.Attributes))
	for _, a := range *body.Attributes {
		cats[strings.ToUpper(a.Name)] = a.Category
	}
	return cats, true, nil
}

// attributeProblem is the failure for the first mapped attribute that the
// account's attributes cats lack or that Brevo computes itself; nil if none.
func (d *Destination) attributeProblem(cats map[string]string) error {
	for _, name := range d.attrs {
		cat, ok := cats[strings.ToUpper(name)]
		switch {
		case !ok:
			return failure.New(failure.InvalidSyncDefinition, fmt.Sprintf(
				"brevo: attribute %s does not exist in this account, and Brevo drops the values of attributes it does not have without an error: "+
					"create it (Brevo: Contacts > Settings > Contact attributes) or fix mapping.attributes", name))
		case slices.Contains(readOnlyCategories, cat):
			return failure.New(failure.InvalidSyncDefinition, fmt.Sprintf(
				"brevo: attribute %s is a %s attribute, which Brevo computes itself: remove it from mapping.attributes", name, cat))
		}
	}
	return nil
}

// ensureAttributes checks the mapped attributes once per destination,
// before its first write. A refused key fails the write at once; a list it
// cannot read for another reason (a transient failure) is tried again at the
// next write, and the writes themselves meet whatever made it fail.
func (d *Destination) ensureAttributes(ctx context.Context) error {
	if len(d.attrs) == 0 {
		return nil
	}
	d.attrMu.Lock()
	defer d.attrMu.Unlock()
	if d.attrChecked {
		return d.attrErr
	}
	cats, listed, err := d.accountAttributes(ctx)
	if failure.CodeOf(err) == failure.DestinationAuth {
		// The key is refused: the writes would be too (every page's).
		d.attrChecked, d.attrErr = true, err
		return err
	}
	if err != nil {
		return nil
	}
	d.attrChecked = true
	if listed {
		d.attrErr = d.attributeProblem(cats)
	}
	return d.attrErr
}
