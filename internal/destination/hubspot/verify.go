package hubspot

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// readBody is the body of batch/read.
type readBody struct {
	Inputs     []readInput `json:"inputs"`
	IDProperty string      `json:"idProperty,omitempty"`
	Properties []string    `json:"properties"`
}

type readInput struct {
	ID string `json:"id"`
}

// additionalEmails is the contact property of a contact's secondary e-mail
// addresses, ";" separated: a merged-away contact's address is kept there,
// and finds the contact as its primary address does (fakehubspot's package
// comment cites HubSpot).
const additionalEmails = "hs_additional_emails"

// read looks ids up by id_property, at most MaxBatch per request, asking
// for props (and additionalEmails); it returns the contacts found by the
// idKey of their id_property value and, by e-mail, of each secondary
// address: HubSpot answers a read by a secondary address with the contact
// under its primary one, and does not say which input found it.
func (d *Destination) read(ctx context.Context, ids []string, props []string) (map[string]object, error) {
	found := make(map[string]object, len(ids))
	if !slices.Contains(props, additionalEmails) {
		props = append(slices.Clone(props), additionalEmails)
	}
	for from := 0; from < len(ids); from += MaxBatch {
		chunk := ids[from:min(from+MaxBatch, len(ids))]
		in := make([]readInput, len(chunk))
		for n, id := range chunk {
			in[n] = readInput{ID: id}
		}
		const route = "POST /crm/v3/objects/contacts/batch/read"
		resp, err := d.do(ctx, call{path: "/crm/v3/objects/contacts/batch/read", route: route, idempotent: true,
			body: readBody{Inputs: in, IDProperty: d.idProp, Properties: props}})
		if err != nil {
			return nil, err
		}
		if resp.Status < 200 || resp.Status > 299 {
			return nil, d.unexpected(decodeAPIError(route, resp.Status, resp.Body))
		}
		var br batchResponse
		if err := json.Unmarshal(resp.Body, &br); err != nil {
			return nil, failure.Wrap(failure.DestinationUnavailable, err, "HubSpot's answer to batch/read could not be read")
		}
		for _, e := range br.Errors {
			if e.Category != "OBJECT_NOT_FOUND" {
				return nil, d.unexpected(&APIError{Route: route, Status: resp.Status, Category: e.Category, Message: e.Message})
			}
		}
		for _, o := range br.Results {
			if v := o.Properties[d.idProp]; v != nil {
				found[d.idKey(*v)] = o
			}
			if d.idProp != "email" {
				continue
			}
			for _, e := range secondaryEmails(o) {
				if _, ok := found[d.idKey(e)]; !ok {
					found[d.idKey(e)] = o
				}
			}
		}
	}
	return found, nil
}

// Verify reports which records HubSpot holds with exactly their mapped
// data, keyed by record key with the contact id as Ref. It reads them back
// with batch/read by id_property, asking for every mapped property, and
// compares each, as it was sent (asSent: a value that is not text without
// the white space at its ends): values equal as strings; in a number property as the same
// decimal number ("42" == "42.0"), in a bool property case-insensitively,
// in a date or datetime property as the same day or instant (sameValue);
// e-mail addresses case-insensitively; the id_property is not compared
// (the contact was found by it, an e-mail maybe as a secondary address of a
// contact it was merged into). A mapped null or "" holds when HubSpot's property is
// empty or absent, and only then.
// Anything else is "not landed": the record is sent again, which at worst
// repeats a write and never loses one. since is not needed: a contact
// holds its current values.
func (d *Destination) Verify(ctx context.Context, recs []destination.Record, _ time.Time) (map[string]string, error) {
	landed := map[string]string{}
	type cand struct {
		key string
		c   contact
	}
	var (
		cands []cand
		ids   []string
		props []string
		seen  = map[string]bool{}
	)
	for _, r := range recs {
		c := d.parseRecord(r)
		if c.invalid != "" {
			continue
		}
		cands = append(cands, cand{r.Key, c})
		if k := d.idKey(c.id); !seen[k] {
			seen[k] = true
			ids = append(ids, c.id)
		}
		for p := range c.props {
			if !slices.Contains(props, p) {
				props = append(props, p)
			}
		}
	}
	if len(cands) == 0 {
		return landed, nil
	}
	if !slices.Contains(props, d.idProp) {
		props = append(props, d.idProp)
	}
	slices.Sort(props)
	found, err := d.read(ctx, ids, props)
	if err != nil {
		return nil, err
	}
	defs := d.propertyDefs(ctx)
	for _, c := range cands {
		o, ok := found[d.idKey(c.c.id)]
		// The contact was found by the id_property's value: it holds it (an
		// e-mail maybe as a secondary address, after a merge), so only the
		// other properties are compared.
		if !ok || !sameProps(defs, withoutKey(d.asSent(defs, c.c.props), d.idProp), o.Properties) {
			continue
		}
		landed[c.key] = o.ID
	}
	return landed, nil
}

func sameProps(defs map[string]property, want map[string]string, got map[string]*string) bool {
	for k, v := range want {
		g := got[k]
		if g == nil {
			if v == "" {
				continue
			}
			return false
		}
		if !sameValue(defs[k].typ, k, v, *g) {
			return false
		}
	}
	return true
}

// propertyDefs are the contact properties by name, read once (GET
// /crm/v3/properties/contacts); nil when they cannot be read, and then
// values compare as text (a value written again, never one lost).
func (d *Destination) propertyDefs(ctx context.Context) map[string]property {
	defs, _ := d.loadDefs(ctx)
	return defs
}

// loadDefs is propertyDefs with the reason they could not be read.
func (d *Destination) loadDefs(ctx context.Context) (map[string]property, error) {
	d.defsMu.Lock()
	defer d.defsMu.Unlock()
	if d.defs == nil {
		defs, err := d.readProperties(apiclient.Unplaced(ctx)) // under defsMu
		if err != nil {
			return nil, err
		}
		d.defs = defs
	}
	return d.defs, nil
}

// sameValue says whether HubSpot's value got of property k, of type typ, is
// the mapped value want. HubSpot keeps every value as text; it answers a
// number as written or normalised, a date as YYYY-MM-DD and a datetime as
// an ISO 8601 instant to the millisecond whichever accepted form was sent
// (its API FAQ), so
// those compare as what they are, and only those: "02134" in a text
// property is not 2134.
func sameValue(typ, k, want, got string) bool {
	if want == got {
		return true
	}
	if k == "email" {
		return strings.EqualFold(strings.TrimSpace(want), strings.TrimSpace(got))
	}
	switch typ {
	case "number":
		a, ok1 := new(big.Rat).SetString(want)
		b, ok2 := new(big.Rat).SetString(got)
		return ok1 && ok2 && a.Cmp(b) == 0
	case "bool":
		return (strings.EqualFold(want, "true") || strings.EqualFold(want, "false")) && strings.EqualFold(want, got)
	case "date":
		a, ok1 := parseTime(want)
		b, ok2 := parseTime(got)
		return ok1 && ok2 && a.UTC().Format(time.DateOnly) == b.UTC().Format(time.DateOnly)
	case "datetime":
		// HubSpot keeps a datetime in epoch milliseconds (its timestamps
		// FAQ): a finer instant (a PostgreSQL timestamptz's microseconds)
		// comes back cut or rounded to its millisecond.
		a, ok1 := parseTime(want)
		b, ok2 := parseTime(got)
		return ok1 && ok2 && (a.Equal(b) || a.Truncate(time.Millisecond).Equal(b) || a.Round(time.Millisecond).Equal(b))
	case "enumeration":
		// Several options ("a;b") are a set: HubSpot's documentation does
		// not say it keeps them in the order sent.
		return sameOptions(want, got)
	}
	return false
}

// sameOptions says whether two ";"-separated option lists name the same
// options.
func sameOptions(a, b string) bool {
	as, bs := strings.Split(a, ";"), strings.Split(b, ";")
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(slices.Compact(as), slices.Compact(bs))
}

// parseTime reads a date or datetime in a form HubSpot accepts or answers:
// epoch milliseconds, YYYY-MM-DD or ISO 8601.
func parseTime(v string) (time.Time, bool) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), true
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// secondaryEmails are o's secondary e-mail addresses.
func secondaryEmails(o object) []string {
	v := o.Properties[additionalEmails]
	if v == nil || strings.TrimSpace(*v) == "" {
		return nil
	}
	var out []string
	for _, e := range strings.Split(*v, ";") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Handle is the record's id_property value: what Remove looks it up by.
func (d *Destination) Handle(rec destination.Record) (string, error) {
	c := d.parseRecord(rec)
	if c.id == "" {
		return "", failure.New(failure.InvalidSyncDefinition, "hubspot: "+c.invalid)
	}
	return c.id, nil
}

// archiveBody is the body of batch/archive.
type archiveBody struct {
	Inputs []readInput `json:"inputs"`
}

// Remove archives the contacts rms name (write_mode mirror): it looks their
// ids up with batch/read by id_property, then archives those found with
// batch/archive. A contact already gone (archived, deleted, never there) is
// Delivered: a removal is idempotent, so one left in doubt is sent again.
// A contact a person merged is never archived, as it holds another
// record's data (another row's of the sync, or none of the sync's): a
// handle found only as a secondary address (its contact was merged into
// another) is Delivered, its own contact being gone; a contact that holds
// secondary addresses besides the handle is Rejected, for a person to
// archive it or not (docs/guide.md#write-modes).
func (d *Destination) Remove(ctx context.Context, rms []destination.Removal) ([]destination.Result, error) {
	if len(rms) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		out := make([]destination.Result, len(rms))
		for i, r := range rms {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
		}
		return out, failure.Wrap(failure.DestinationUnavailable, err, "hubspot request interrupted")
	}
	var out []destination.Result
	for from := 0; from < len(rms); from += MaxBatch {
		chunk := rms[from:min(from+MaxBatch, len(rms))]
		ids := make([]string, 0, len(chunk))
		for _, r := range chunk {
			ids = append(ids, r.Handle)
		}
		found, err := d.read(ctx, ids, []string{d.idProp})
		if err != nil {
			return out, err
		}
		var (
			arch    []readInput
			refused = map[string]bool{}
			queued  = map[string]bool{}
		)
		for _, r := range chunk {
			o, ok := found[d.idKey(r.Handle)]
			switch {
			case !ok || !d.isPrimary(o, r.Handle):
				// gone, or merged into another contact
			case len(secondaryEmails(o)) > 0:
				refused[r.Key] = true
			case !queued[o.ID]:
				queued[o.ID] = true
				arch = append(arch, readInput{ID: o.ID})
			}
		}
		if len(arch) > 0 {
			const route = "POST /crm/v3/objects/contacts/batch/archive"
			// Archiving twice is harmless: a lost answer is retried.
			resp, err := d.do(ctx, call{path: "/crm/v3/objects/contacts/batch/archive", route: route, idempotent: true,
				body: archiveBody{Inputs: arch}})
			if err != nil {
				return out, err
			}
			if resp.Status < 200 || resp.Status > 299 {
				ae := decodeAPIError(route, resp.Status, resp.Body)
				if resp.Status != http.StatusBadRequest || !ae.HubSpots {
					return out, d.unexpected(ae)
				}
				for _, r := range chunk {
					out = append(out, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: rejection(ae.Category, ae.Message, ae.Status)})
				}
				continue
			}
		}
		for _, r := range chunk {
			if refused[r.Key] {
				out = append(out, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: mergedContact})
				continue
			}
			res := destination.Result{Key: r.Key, Outcome: destination.Delivered}
			if o, ok := found[d.idKey(r.Handle)]; ok && d.isPrimary(o, r.Handle) {
				res.Ref = o.ID
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// mergedContact is the reason a mirror removal of a contact that holds
// other e-mail addresses is refused.
const mergedContact = "the contact also holds other e-mail addresses (hs_additional_emails: merged or added in HubSpot), " +
	"so it holds more than this record; oncesync does not archive it: archive it in HubSpot if it should go"

// isPrimary reports whether o's id_property value is handle (not one of its
// secondary addresses).
func (d *Destination) isPrimary(o object, handle string) bool {
	v := o.Properties[d.idProp]
	return v != nil && d.idKey(*v) == d.idKey(handle)
}
