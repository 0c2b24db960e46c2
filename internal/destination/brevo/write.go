package brevo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// extIDAttribute is the attribute that carries ext_id on the bulk path:
// requestContactImport's jsonBody items have only email and attributes, and
// Brevo's imports take EXT_ID as a column like any attribute. Brevo also
// shows a contact's ext_id as this attribute when it is read back, which is
// how Verify compares it.
const extIDAttribute = "EXT_ID"

// contact is a record's data read for Brevo.
type contact struct {
	email string
	extID string
	// clearExtID: ext_id is mapped and the row's value is empty or NULL,
	// so the contact must hold none (an earlier value is erased).
	clearExtID bool
	attrs      map[string]any
	// attrsJSON is the attributes as an import item carries them,
	// json.Marshal(importAttrs(c)), encoded once by parseRecord; nil when
	// there are none (omitted from request bodies).
	attrsJSON []byte
	// invalid, when set, is why the record is rejected without a request.
	invalid string
}

// parseRecord reads a mapped record: {"email": string, "ext_id"?: string,
// "attributes"?: object}.
func parseRecord(r destination.Record) contact {
	var c contact
	switch v := r.Data["email"].(type) {
	case nil:
	case string:
		c.email = strings.TrimSpace(v)
	default:
		c.invalid = "email must be a string"
		return c
	}
	ext, mapped := r.Data["ext_id"]
	switch v := ext.(type) {
	case nil:
	case string:
		c.extID = v
	case json.Number:
		c.extID = v.String()
	case float64, float32, int, int32, int64, uint, uint32, uint64:
		c.extID = fmt.Sprint(v)
	default:
		c.invalid = "ext_id must be a string"
		return c
	}
	switch v := r.Data["attributes"].(type) {
	case nil:
	case map[string]any:
		c.attrs = v
	default:
		c.invalid = "attributes must be an object"
		return c
	}
	c.clearExtID = mapped && c.extID == ""
	if mapped {
		for k := range c.attrs {
			if strings.EqualFold(k, extIDAttribute) {
				c.invalid = "ext_id is mapped twice: as ext_id and as the EXT_ID attribute"
				return c
			}
		}
	}
	if c.invalid = c.encode(); c.invalid != "" {
		return c
	}
	if c.email != "" && !plausibleEmail(c.email) {
		c.invalid = "invalid email address" + destination.RefusedBeforeSending
	}
	if c.email == "" && c.attrs["SMS"] == nil {
		c.invalid = "record has no email (and no SMS attribute)"
	}
	return c
}

// encode sets c.attrsJSON from c's attributes, and returns why c is
// rejected if they cannot be encoded.
func (c *contact) encode() string {
	c.attrsJSON = nil
	if ia := importAttrs(*c); len(ia) > 0 {
		b, err := encodeAttrs(ia)
		if err != nil {
			return "attributes cannot be encoded as JSON"
		}
		c.attrsJSON = b
	}
	return ""
}

// importAttrs is what an import item's attributes carry: the mapped
// attributes, plus ext_id as EXT_ID (see extIDAttribute), empty when the
// row clears it (singleAttrs). It is c.attrs itself when there is no ext_id.
func importAttrs(c contact) map[string]any {
	if c.extID == "" {
		return c.singleAttrs()
	}
	return withAttr(c.attrs, extIDAttribute, c.extID)
}

// singleAttrs is what a single write's attributes carry: the mapped
// attributes, plus an empty EXT_ID when the row clears its ext_id. An empty
// value clears an attribute, as for any other attribute
// (docs/guide.md#a-value-cleared-in-the-source), and the body's ext_id
// field cannot say it: it is left out when empty, which keeps the value.
func (c contact) singleAttrs() map[string]any {
	if !c.clearExtID {
		return c.attrs
	}
	return withAttr(c.attrs, extIDAttribute, "")
}

// withAttr is a copy of attrs with name set to v.
func withAttr(attrs map[string]any, name string, v any) map[string]any {
	out := make(map[string]any, len(attrs)+1)
	for k, x := range attrs {
		out[k] = x
	}
	out[name] = v
	return out
}

// plausibleEmail is a loose syntax check (one @, non-empty local part and
// domain, no spaces or quoting characters), close to what API validators
// accept for format "email". Brevo stays the judge of deliverability.
func plausibleEmail(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || at != strings.LastIndexByte(s, '@') || at == len(s)-1 {
		return false
	}
	return !strings.ContainsAny(s, " \t\r\n<>\",;()[]\\")
}

// Judge says which of recs Write would reject without sending them
// (destination.Judge): a record parseRecord refuses, or, once a write of
// this destination has read the account's attribute types, a value with no
// form of its attribute's type. It sends no request: a dry run reads the
// source and the ledger only.
func (d *Destination) Judge(_ context.Context, recs []destination.Record) ([]string, error) {
	d.attrMu.Lock()
	types := d.attrTypes
	d.attrMu.Unlock()
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = prepare(r, types).invalid
	}
	return out, nil
}

// prepare reads r for a write: parseRecord, then its values of the typed
// attributes types (typeValues; nil when none).
func prepare(r destination.Record, types map[string]attrType) contact {
	c := parseRecord(r)
	if c.invalid == "" && types != nil {
		c.invalid = typeValues(&c, types)
	}
	return c
}

// createContact is the body of POST /contacts (swagger: createContact).
type createContact struct {
	Email         string         `json:"email,omitempty"`
	ExtID         string         `json:"ext_id,omitempty"`
	Attributes    map[string]any `json:"attributes,omitempty"`
	ListIDs       []int64        `json:"listIds,omitempty"`
	UpdateEnabled bool           `json:"updateEnabled"`
}

// The body of POST /contacts/import (swagger: requestContactImport) is built
// by appending bytes: see encode.go.

// Write delivers recs. On the single path each record is one POST /contacts
// (bounded concurrency), Delivered or Rejected. On the bulk path the page
// goes to POST /contacts/import in bodies under MaxImportBody; Brevo answers
// 202 with a process id and every record of the body is Accepted with that
// id as Ref: Outcomes tells later which rows the process applied. A body
// Brevo refuses whole (400) is resent on the single path so only the bad
// record is rejected, with Brevo's own message. On a page-level failure the
// results of records already settled are returned with the error.
func (d *Destination) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return notSent(recs), failure.Wrap(failure.DestinationUnavailable, fmt.Errorf("%w: %w", destination.ErrNotSent, err),
			"brevo request interrupted")
	}
	types, err := d.ensureAttributes(ctx)
	if err != nil {
		return notSent(recs), err
	}
	w := &pageWrite{d: d, recs: recs, results: make([]destination.Result, len(recs)), done: make([]bool, len(recs)),
		maybeSent: make([]bool, len(recs))}
	var todo []int
	cs := make([]contact, len(recs))
	for i, r := range recs {
		cs[i] = prepare(r, types)
		if cs[i].invalid != "" {
			w.set(i, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: cs[i].invalid})
			continue
		}
		todo = append(todo, i)
	}
	w.contacts = cs
	if d.imports() {
		err = w.bulk(ctx, todo)
	} else {
		err = w.single(ctx, todo)
	}
	if err != nil {
		// Records whose request provably never reached Brevo (never sent,
		// or refused before being written) are not in doubt (docs/guide.md#the-ledger-and-its-retention).
		for i, r := range recs {
			if !w.done[i] && !w.maybeSent[i] {
				w.set(i, destination.Result{Key: r.Key, Outcome: destination.NotSent})
			}
		}
	}
	return w.collect(), err
}

func notSent(recs []destination.Record) []destination.Result {
	out := make([]destination.Result, len(recs))
	for i, r := range recs {
		out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
	}
	return out
}

// pageWrite is the state of one Write. Each index of results/done is written
// by one goroutine only and read after they all finished.
type pageWrite struct {
	d        *Destination
	recs     []destination.Record
	contacts []contact
	results  []destination.Result
	done     []bool
	// maybeSent: a request carrying the record failed in a way that may
	// have reached Brevo (it is in doubt unless settled).
	maybeSent []bool
}

func (w *pageWrite) set(i int, r destination.Result) { w.results[i], w.done[i] = r, true }

// failed notes that the request carrying idx failed with err and returns err.
func (w *pageWrite) failed(idx []int, err error) error {
	if !errors.Is(err, destination.ErrNotSent) {
		for _, i := range idx {
			w.maybeSent[i] = true
		}
	}
	return err
}

func (w *pageWrite) collect() []destination.Result {
	out := make([]destination.Result, 0, len(w.results))
	for i, r := range w.results {
		if w.done[i] {
			out = append(out, r)
		}
	}
	return out
}

// recordLevel reports whether a 4xx answer is about the request's content
// (a record's data) rather than the account or the configuration.
func recordLevel(e *APIError) bool {
	// A body over the limit is the records' whoever says so (Brevo's
	// gateway answers 413 with its own page); a 400 or 422 is a record's
	// only in Brevo's words (APIError.says).
	return e.Status == http.StatusRequestEntityTooLarge || e.says(http.StatusBadRequest, http.StatusUnprocessableEntity)
}

func (w *pageWrite) unexpected(e *APIError) error {
	return failure.Wrap(failure.DestinationUnavailable, w.d.safe(e),
		"brevo answered HTTP %d; check the destination's base_url", e.Status)
}

// single writes idx one POST /contacts each.
func (w *pageWrite) single(ctx context.Context, idx []int) error {
	// Records of one address (in any case: Brevo keeps it lower-cased) go
	// one after the other, in page order, so the contact ends with the
	// values of the one read last, as an import leaves it; sent side by
	// side, whichever landed last won, and no later run changed it (an
	// independent check, 2026-12-06).
	chains := apiclient.Chains(idx, func(i int) string { return strings.ToLower(w.contacts[i].email) })
	err := apiclient.FanOutChains(ctx, chains, w.d.conc, w.one)
	if err != nil && failure.CodeOf(err) == failure.Internal {
		return w.d.interrupted(ctx, err)
	}
	return err
}

// one sends record i on the single path.
func (w *pageWrite) one(ctx context.Context, i int) error {
	c := w.contacts[i]
	req := request{method: http.MethodPost, path: "/contacts", route: "POST /contacts"}
	switch w.d.writeMode {
	case destination.Update:
		// PUT updates a contact that exists and never creates one.
		req = request{method: http.MethodPut, path: "/contacts/" + escapeIdentifier(c.email), route: "PUT /contacts/{identifier}",
			query: url.Values{"identifierType": {"email_id"}},
			body:  marshal(updateContact{ExtID: c.extID, Attributes: c.singleAttrs(), ListIDs: w.d.listIDs})}
	default:
		// create leaves updateEnabled false: Brevo then refuses an
		// existing contact as a duplicate instead of changing it.
		req.body = marshal(createContact{
			Email: c.email, ExtID: c.extID, Attributes: c.singleAttrs(),
			ListIDs: w.d.listIDs, UpdateEnabled: w.d.writeMode != destination.Create,
		})
	}
	resp, err := w.d.do(ctx, req)
	if refused, ok := err.(*APIError); ok && w.recs[i].Redelivery && w.d.moved(c, refused) {
		// The row's address changed: update its contact, found by
		// its ext_id, e-mail included.
		req = moveRequest(c, w.d.listIDs)
		resp, err = w.d.do(ctx, req)
		if ae, ok := err.(*APIError); ok && ae.says(http.StatusNotFound) {
			err = refused // no contact has that ext_id: the first refusal stands
		}
	}
	if err != nil {
		apiErr, ok := err.(*APIError) // do returns it bare for the caller to judge
		if !ok {
			return w.failed([]int{i}, err)
		}
		if skip := w.d.skipped(apiErr); skip != "" {
			w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Delivered, Skipped: skip})
			return nil
		}
		if !recordLevel(apiErr) {
			return w.failed([]int{i}, w.unexpected(apiErr))
		}
		w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Rejected, Message: rejection(apiErr)})
		return nil
	}
	ref, ok := singleAnswer(req.method, resp)
	if !ok {
		// A 2xx that is not Brevo's (a web server or a proxy at
		// base_url) says nothing of the contact: in doubt, so the
		// read-back decides, never counted as written.
		return w.failed([]int{i}, failure.Wrap(failure.DestinationUnavailable, errNotBrevo,
			"brevo answered %s with HTTP %d and no contact; check the destination's base_url", req.route, resp.status))
	}
	w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Delivered, Ref: ref})
	return nil
}

// moved reports whether Brevo's refusal e of c may mean that c's address
// changed while its ext_id stayed (docs/guide.md#an-address-that-changes),
// asked only of a record the sync delivered before (Record.Redelivery):
// on a first delivery the ext_id's contact is not the row's, and updating
// it would take another sync's (or a person's) contact over:
// an upsert finds no contact at the new address and refuses an ext_id
// another contact holds ("a 4xx error is returned on identifier
// conflict", in any of its forms: errors.go); an update finds no contact
// at the new address (404).
func (d *Destination) moved(c contact, e *APIError) bool {
	if c.extID == "" || c.email == "" {
		return false
	}
	switch d.writeMode {
	case destination.Upsert, destination.Mirror:
		return e.conflictOn(identExtID, true)
	case destination.Update:
		return e.says(http.StatusNotFound)
	}
	return false
}

// moveRequest updates the contact holding c's ext_id to c, its e-mail
// included (PUT /contacts/{ext_id}?identifierType=ext_id; swagger:
// updateContact, whose attributes take EMAIL to change it).
func moveRequest(c contact, lists []int64) request {
	attrs := withAttr(c.attrs, "EMAIL", c.email)
	return request{method: http.MethodPut, path: "/contacts/" + escapeIdentifier(c.extID), route: "PUT /contacts/{identifier}",
		query: url.Values{"identifierType": {"ext_id"}},
		body:  marshal(updateContact{Attributes: attrs, ListIDs: lists})}
}

// errNotBrevo is a success status whose answer is not one Brevo gives.
var errNotBrevo = errors.New("a success answer that is not Brevo's")

// singleAnswer reads a successful answer to a single write as
// ../shared/brevo/swagger.yaml defines it: POST /contacts answers 201 with
// the new contact's id, or 204 when it updated one; PUT
// /contacts/{identifier} answers 204. It returns the contact's id when
// there is one, and false for any other answer.
func singleAnswer(method string, resp *response) (string, bool) {
	switch {
	case resp.status == http.StatusNoContent:
		return "", true
	case method == http.MethodPost && resp.status == http.StatusCreated:
		var created struct {
			ID *int64 `json:"id"`
		}
		if json.Unmarshal(resp.body, &created) != nil || created.ID == nil {
			return "", false
		}
		return strconv.FormatInt(*created.ID, 10), true
	}
	return "", false
}

// updateContact is the body of PUT /contacts/{identifier} (swagger:
// updateContact).
type updateContact struct {
	ExtID         string         `json:"ext_id,omitempty"`
	Attributes    map[string]any `json:"attributes,omitempty"`
	ListIDs       []int64        `json:"listIds,omitempty"`
	UnlinkListIDs []int64        `json:"unlinkListIds,omitempty"`
}

// skipped says why the write mode leaves a record as Brevo has it, from
// Brevo's refusal: update finds no contact (404), create finds the e-mail
// taken (a conflict on the email, in any of its forms: errors.go); "" for
// any other answer.
func (d *Destination) skipped(e *APIError) string {
	switch {
	case d.writeMode == destination.Update && e.says(http.StatusNotFound):
		return destination.SkipNotFound
	case d.writeMode == destination.Create && e.conflictOn(identEmail, false):
		return destination.SkipExists
	}
	return ""
}

// rejection is the message stored for a rejected record: Brevo's own.
func rejection(e *APIError) string {
	switch {
	case e.Message != "" && e.Code != "":
		return e.Code + ": " + e.Message
	case e.Message != "":
		return e.Message
	case e.Code != "":
		return e.Code
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// bulk imports idx in bodies under the size limit.
func (w *pageWrite) bulk(ctx context.Context, idx []int) error {
	page := w.encodeImport(idx)
	for _, s := range page.chunks(w.d.maxBody) {
		chunk := idx[s.from:s.to]
		resp, err := w.d.do(ctx, request{method: http.MethodPost, path: "/contacts/import",
			route: "POST /contacts/import", body: page.body(s)})
		if err != nil {
			apiErr, ok := err.(*APIError) // do returns it bare for the caller to judge
			if !ok {
				return w.failed(chunk, err)
			}
			if !recordLevel(apiErr) {
				return w.failed(chunk, w.unexpected(apiErr))
			}
			// One bad record refuses the whole import: resend one by one so
			// only it is rejected, with Brevo's message for it.
			if err := w.single(ctx, chunk); err != nil {
				return err
			}
			continue
		}
		var created struct {
			ProcessID *int64 `json:"processId"`
		}
		if json.Unmarshal(resp.body, &created) != nil || created.ProcessID == nil {
			// Brevo took the import but did not say which process runs it:
			// nothing can be polled, so the chunk is in doubt (Verify).
			return w.failed(chunk, failure.Wrap(failure.DestinationUnavailable, ErrOutcomeUnknown,
				"brevo accepted an import without a processId"))
		}
		// A 202 is not a delivery: the process judges each row later and
		// may skip some or fail whole (Outcomes).
		ref := strconv.FormatInt(*created.ProcessID, 10)
		for _, i := range chunk {
			w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Accepted, Ref: ref})
		}
	}
	return nil
}
