package hubspot

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"

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

// read looks ids up by id_property, at most MaxBatch per request, asking
// for props; it returns the contacts found by idKey.
func (d *Destination) read(ctx context.Context, ids []string, props []string) (map[string]object, error) {
	found := make(map[string]object, len(ids))
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
		}
	}
	return found, nil
}

// Verify reports which records HubSpot holds with exactly their mapped
// data, keyed by record key with the contact id as Ref. It reads them back
// with batch/read by id_property, asking for every mapped property, and
// compares each: values equal as strings, or as the same decimal number
// ("42" == "42.0"), or as booleans case-insensitively; e-mail addresses
// case-insensitively. A mapped null or "" holds when HubSpot's property is
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
	for _, c := range cands {
		o, ok := found[d.idKey(c.c.id)]
		if !ok || !sameProps(c.c.props, o.Properties) {
			continue
		}
		landed[c.key] = o.ID
	}
	return landed, nil
}

func sameProps(want map[string]string, got map[string]*string) bool {
	for k, v := range want {
		g := got[k]
		if g == nil {
			if v == "" {
				continue
			}
			return false
		}
		if !sameValue(k, v, *g) {
			return false
		}
	}
	return true
}

func sameValue(k, want, got string) bool {
	if want == got {
		return true
	}
	if k == "email" {
		return strings.EqualFold(strings.TrimSpace(want), strings.TrimSpace(got))
	}
	if a, ok := new(big.Rat).SetString(want); ok {
		if b, ok := new(big.Rat).SetString(got); ok {
			return a.Cmp(b) == 0
		}
	}
	if (strings.EqualFold(want, "true") || strings.EqualFold(want, "false")) && strings.EqualFold(want, got) {
		return true
	}
	return false
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
		var arch []readInput
		for _, o := range found {
			arch = append(arch, readInput{ID: o.ID})
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
				if resp.Status != http.StatusBadRequest {
					return out, d.unexpected(ae)
				}
				for _, r := range chunk {
					out = append(out, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: rejection(ae.Category, ae.Message, ae.Status)})
				}
				continue
			}
		}
		for _, r := range chunk {
			res := destination.Result{Key: r.Key, Outcome: destination.Delivered}
			if o, ok := found[d.idKey(r.Handle)]; ok {
				res.Ref = o.ID
			}
			out = append(out, res)
		}
	}
	return out, nil
}
