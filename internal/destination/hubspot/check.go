package hubspot

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Check reads the account's contact properties (GET
// /crm/v3/properties/contacts: the token works and may read contacts'
// schema) and checks that id_property exists and identifies contacts
// (email, or hasUniqueValue) and that every mapped property exists and can
// be written. Nothing is written.
func (d *Destination) Check(ctx context.Context) ([]string, error) {
	props, err := d.readProperties(ctx)
	if err != nil {
		return nil, err
	}
	checked := []string{"hubspot: the token is accepted (" + propertiesRoute + ")"}
	p, ok := props[d.idProp]
	switch {
	case !ok:
		return checked, failure.New(failure.InvalidSyncDefinition,
			fmt.Sprintf("hubspot: id_property %s is not a contact property of this account: fix destination.id_property", d.idProp))
	case d.idProp != "email" && !p.unique:
		// HubSpot's email is unique without saying so (hasUniqueValue false).
		return checked, failure.New(failure.InvalidSyncDefinition,
			fmt.Sprintf("hubspot: id_property %s does not have unique values (hasUniqueValue): HubSpot cannot find contacts by it", d.idProp))
	}
	checked = append(checked, fmt.Sprintf("hubspot: id_property %s identifies contacts", d.idProp))
	for _, name := range d.props {
		p, ok := props[name]
		switch {
		case !ok:
			return checked, failure.New(failure.InvalidSyncDefinition,
				fmt.Sprintf("hubspot: property %s does not exist in this account: fix mapping.attributes (HubSpot: Settings > Properties shows each property's internal name)", name))
		case p.readOnly:
			return checked, failure.New(failure.InvalidSyncDefinition,
				fmt.Sprintf("hubspot: property %s is read-only: remove it from mapping.attributes", name))
		}
		checked = append(checked, fmt.Sprintf("hubspot: property %s exists", name))
	}
	// Reading the properties takes no write scope: a token that may only
	// read passed every check, and the first run failed destination_auth
	// (an independent check, 2026-12-06).
	switch scopes, ok := d.tokenScopes(ctx); {
	case !ok:
		checked = append(checked, "hubspot: the token's scopes could not be read ("+tokenInfoRoute+" answers for private apps' tokens only): the first write tells whether it may write contacts")
	case !slices.Contains(scopes, writeScope):
		return checked, failure.New(failure.DestinationAuth, fmt.Sprintf("hubspot: the token's private app lacks the %s scope (it has %s): every write would be refused 403 MISSING_SCOPES; "+
			"give the app that scope in HubSpot (Settings > Integrations > Private Apps > the app > Scopes) and use its token", writeScope, strings.Join(scopes, ", ")))
	default:
		checked = append(checked, "hubspot: the token may write contacts ("+writeScope+")")
	}
	return checked, nil
}

const (
	tokenInfoRoute = "POST /oauth/v2/private-apps/get/access-token-info"
	// writeScope is the scope HubSpot asks of contact writes.
	writeScope = "crm.objects.contacts.write"
)

// tokenScopes reads the private app's scopes of the token (HubSpot's
// Private apps documentation: the token in the body, {"tokenKey": ...}).
// ok is false when HubSpot does not say: an OAuth app's token, a proxy.
func (d *Destination) tokenScopes(ctx context.Context) (scopes []string, ok bool) {
	resp, err := d.do(ctx, call{method: http.MethodPost, path: "/oauth/v2/private-apps/get/access-token-info", route: tokenInfoRoute,
		body: map[string]string{"tokenKey": d.token}, idempotent: true})
	if err != nil || resp.Status != http.StatusOK {
		return nil, false
	}
	var b struct {
		Scopes []string `json:"scopes"`
	}
	if json.Unmarshal(resp.Body, &b) != nil || b.Scopes == nil {
		return nil, false
	}
	return b.Scopes, true
}

const propertiesRoute = "GET /crm/v3/properties/contacts"

// property is what oncesync reads of a contact property's definition.
type property struct {
	typ              string // string, number, bool, date, datetime, enumeration
	unique, readOnly bool
	// options are an enumeration's values in their display order.
	options []string
}

// readProperties reads the account's contact properties by name.
func (d *Destination) readProperties(ctx context.Context) (map[string]property, error) {
	resp, err := d.do(ctx, call{method: http.MethodGet, path: "/crm/v3/properties/contacts", route: propertiesRoute, idempotent: true})
	if err != nil {
		return nil, d.checkFailure(err)
	}
	if resp.Status != http.StatusOK {
		return nil, d.checkFailure(d.unexpected(decodeAPIError(propertiesRoute, resp.Status, resp.Body)))
	}
	var list struct {
		Results *[]struct {
			Name                 string `json:"name"`
			Type                 string `json:"type"`
			HasUniqueValue       bool   `json:"hasUniqueValue"`
			ModificationMetadata struct {
				ReadOnlyValue bool `json:"readOnlyValue"`
			} `json:"modificationMetadata"`
			Options []struct {
				Value        string `json:"value"`
				DisplayOrder int    `json:"displayOrder"`
			} `json:"options"`
		} `json:"results"`
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		return nil, failure.Wrap(failure.DestinationUnavailable, err, "hubspot: the contact properties could not be read")
	}
	if list.Results == nil || len(*list.Results) == 0 {
		// Every HubSpot account has contact properties (email among
		// them): a 200 without any is another server's answer, and
		// blaming id_property for it would send a person the wrong way.
		return nil, failure.New(failure.DestinationUnavailable,
			"hubspot: the answer to "+propertiesRoute+" lists no contact properties, so it is not HubSpot's: check destination.base_url")
	}
	props := make(map[string]property, len(*list.Results))
	for _, p := range *list.Results {
		opts := slices.Clone(p.Options)
		slices.SortStableFunc(opts, func(a, b struct {
			Value        string `json:"value"`
			DisplayOrder int    `json:"displayOrder"`
		}) int {
			return cmp.Compare(a.DisplayOrder, b.DisplayOrder)
		})
		pr := property{typ: p.Type, unique: p.HasUniqueValue, readOnly: p.ModificationMetadata.ReadOnlyValue}
		for _, o := range opts {
			pr.options = append(pr.options, o.Value)
		}
		props[p.Name] = pr
	}
	return props, nil
}

// checkFailure keeps the HTTP layer's codes (auth, unavailable, rate
// limited) and makes any other failure destination_unavailable.
func (d *Destination) checkFailure(err error) error {
	if failure.CodeOf(err) != failure.Internal {
		return err
	}
	return failure.Wrap(failure.DestinationUnavailable, err, "hubspot: could not read the contact properties")
}

var _ destination.AccountTeller = (*Destination)(nil)

// accountInfoRoute is the account's details (Account information API).
const accountInfoRoute = "GET /account-info/v3/details"

// AccountID is the portal the token reaches (GET /account-info/v3/details'
// portalId, HubSpot's account id). The runner keeps only a digest of it.
func (d *Destination) AccountID(ctx context.Context) (string, error) {
	resp, err := d.do(ctx, call{method: http.MethodGet, path: "/account-info/v3/details", route: accountInfoRoute, idempotent: true})
	if err != nil {
		if failure.CodeOf(err) != failure.Internal {
			return "", err
		}
		return "", failure.Wrap(failure.DestinationUnavailable, err, "hubspot: could not read the account's details")
	}
	if resp.Status != http.StatusOK {
		return "", destination.ErrNoAccountID
	}
	var info struct {
		PortalID json.Number `json:"portalId"`
	}
	if json.Unmarshal(resp.Body, &info) != nil || info.PortalID == "" {
		return "", destination.ErrNoAccountID
	}
	return "hubspot portal " + info.PortalID.String(), nil
}
