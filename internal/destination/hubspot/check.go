package hubspot

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/oncesync/oncesync/internal/failure"
)

// Check reads the account's contact properties (GET
// /crm/v3/properties/contacts: the token works and may read contacts'
// schema) and checks that id_property exists and identifies contacts
// (email, or hasUniqueValue) and that every mapped property exists and can
// be written. Nothing is written.
func (d *Destination) Check(ctx context.Context) ([]string, error) {
	const route = "GET /crm/v3/properties/contacts"
	resp, err := d.do(ctx, call{method: http.MethodGet, path: "/crm/v3/properties/contacts", route: route, idempotent: true})
	if err != nil {
		return nil, d.checkFailure(err)
	}
	if resp.Status != http.StatusOK {
		return nil, d.checkFailure(d.unexpected(decodeAPIError(route, resp.Status, resp.Body)))
	}
	var list struct {
		Results []struct {
			Name                 string `json:"name"`
			HasUniqueValue       bool   `json:"hasUniqueValue"`
			ModificationMetadata struct {
				ReadOnlyValue bool `json:"readOnlyValue"`
			} `json:"modificationMetadata"`
		} `json:"results"`
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		return nil, failure.Wrap(failure.DestinationUnavailable, err, "hubspot: the contact properties could not be read")
	}
	type prop struct{ unique, readOnly bool }
	props := map[string]prop{}
	for _, p := range list.Results {
		props[p.Name] = prop{p.HasUniqueValue, p.ModificationMetadata.ReadOnlyValue}
	}
	checked := []string{"hubspot: the token is accepted (" + route + ")"}
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
	return checked, nil
}

// checkFailure keeps the HTTP layer's codes (auth, unavailable, rate
// limited) and makes any other failure destination_unavailable.
func (d *Destination) checkFailure(err error) error {
	if failure.CodeOf(err) != failure.Internal {
		return err
	}
	return failure.Wrap(failure.DestinationUnavailable, err, "hubspot: could not read the contact properties")
}
