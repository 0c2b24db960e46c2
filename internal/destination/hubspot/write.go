package hubspot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// contact is a record's data read for HubSpot.
type contact struct {
	// id is the id_property's value.
	id string
	// props are the properties sent, values as HubSpot strings; a mapped
	// null is sent as "", which clears the property (a value cleared in the
	// source is cleared in HubSpot, docs/guide.md#a-value-cleared-in-the-source).
	props map[string]string
	// invalid, when set, is why the record is rejected without a request.
	invalid string
}

// parseRecord reads a mapped record {"email"?: string, "attributes"?: object}.
func (d *Destination) parseRecord(r destination.Record) contact {
	c := contact{props: map[string]string{}}
	ev, mapped := r.Data["email"]
	switch v := ev.(type) {
	case nil:
		if mapped {
			c.props["email"] = "" // cleared in the source: cleared in HubSpot
		}
	case string:
		// An empty e-mail clears the property as any other does, under
		// an id_property of its own; as the id_property it is refused.
		c.props["email"] = strings.TrimSpace(v)
	default:
		c.invalid = "email must be a string"
		return c
	}
	switch attrs := r.Data["attributes"].(type) {
	case nil:
	case map[string]any:
		for k, v := range attrs {
			s, err := propertyValue(v)
			if err != nil {
				c.invalid = fmt.Sprintf("property %s: %v", k, err)
				return c
			}
			c.props[k] = s
		}
	default:
		c.invalid = "attributes must be an object"
		return c
	}
	if k, n := overLimit(c.props); k != "" {
		// HubSpot refuses the value (a create batch whole): refused here,
		// without a request, and without its value in the message.
		c.invalid = fmt.Sprintf("property %s: the value is %d characters long, more than the %d HubSpot takes", k, n, MaxValueChars) + destination.RefusedBeforeSending
		return c
	}
	c.id = c.props[d.idProp]
	if c.id == "" {
		c.invalid = fmt.Sprintf("record has no value for the id_property %s", d.idProp)
		if d.idProp == "email" {
			c.invalid = "record has no email"
		}
		return c
	}
	if d.idProp == "email" && !plausibleEmail(c.id) {
		c.invalid = "invalid email address" + destination.RefusedBeforeSending
	}
	return c
}

// propertyValue is v as a HubSpot property value (HubSpot stores strings;
// "" clears one).
func propertyValue(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil // HubSpot clears a property set to ""
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", errors.New("not a finite number")
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), nil
	case int:
		return strconv.Itoa(x), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case bool:
		return strconv.FormatBool(x), nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), nil
	case []any:
		return optionsValue(x)
	}
	return "", fmt.Errorf("a %T cannot be a HubSpot property value (strings, numbers, booleans, times and lists of them only)", v)
}

// optionsValue is a list as HubSpot takes several options of an
// enumeration (multiple checkboxes): "a;b" (its FAQ "How do I set multiple
// values for checkbox properties"). Empty items name no option and are
// left out; an empty list clears the property. An item holding ";" would
// read as two options, so it is refused rather than sent as another value.
func optionsValue(list []any) (string, error) {
	parts := make([]string, 0, len(list))
	for _, e := range list {
		switch e.(type) {
		case []any, map[string]any:
			return "", errors.New("a list of lists or objects cannot be a HubSpot property value")
		}
		s, err := propertyValue(e)
		if err != nil {
			return "", err
		}
		if strings.Contains(s, ";") {
			return "", errors.New(`an item of the list holds ";", which HubSpot reads as two options`)
		}
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ";"), nil
}

// overLimit returns the first property, by name, whose value is
// longer than MaxValueChars, and its length in characters ("" when none).
func overLimit(props map[string]string) (string, int) {
	var name string
	var n int
	for k, v := range props {
		if len(v) <= MaxValueChars {
			continue // bytes bound characters
		}
		if c := utf8.RuneCountInString(v); c > MaxValueChars && (name == "" || k < name) {
			name, n = k, c
		}
	}
	return name, n
}

// plausibleEmail is a loose syntax check; HubSpot stays the judge.
func plausibleEmail(s string) bool {
	at := strings.IndexByte(s, '@')
	if at <= 0 || at != strings.LastIndexByte(s, '@') || at == len(s)-1 {
		return false
	}
	return !strings.ContainsAny(s, " \t\r\n<>\",;()[]\\")
}

// blank reports whether r is white space or an invisible (format)
// character: HubSpot refuses either at the ends of a value that is not text
// (asSent). Which characters it counts as invisible is not documented.
func blank(r rune) bool { return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) }

// blankEnds reports whether v, or one of its ";"-separated parts, begins
// or ends with a blank character.
func blankEnds(v string) bool {
	for _, x := range strings.Split(v, ";") {
		if x != strings.TrimFunc(x, blank) {
			return true
		}
	}
	return v != strings.TrimFunc(v, blank)
}

// asSent is props as they are sent to HubSpot: each value in the form
// HubSpot takes for its property's type (defs), which it would otherwise
// refuse, the record rejected although its value is a valid one:
//   - a property that is not text (a number, bool, date, datetime,
//     enumeration, and each option of a multi-value enumeration): without
//     white space or invisible characters at its ends. HubSpot's changelog
//     "Breaking Change: Enhanced Validations for Non-String Properties in
//     HubSpot's CRMObject APIs" (in force since 2025-04-07) refuses "leading
//     or trailing whitespace or invisible unicode characters" there with a
//     400 for the whole batch, and trimmed every such value and option it
//     held: "42 " is 42, "gold\n" the option gold.
//   - a number: in plain decimal notation (plainNumber). HubSpot's changelog
//     "Upcoming: A change for number properties in CRM APIs" takes "only
//     numeric digits, an optional single negative sign ("-"), and an
//     optional single decimal point", where a source gives a double's
//     0.00001 as "1e-05" (PostgreSQL) and JSON may hold "1.5E+3" or "+7".
//
// A text (string) property's value is sent as it is, spaces and all, and so
// is the id_property's (it names the contact, and Remove looks it up as it
// is). Without defs (they could not be read), props are sent as they are.
func (d *Destination) asSent(defs map[string]property, props map[string]string) map[string]string {
	var out map[string]string
	for k, v := range props {
		p, ok := defs[k]
		if !ok || p.typ == "string" || k == d.idProp || !reshapeable(v) {
			continue
		}
		t := strings.TrimFunc(v, blank)
		switch p.typ {
		case "enumeration":
			parts := strings.Split(t, ";")
			for i, x := range parts {
				parts[i] = strings.TrimFunc(x, blank)
			}
			t = strings.Join(parts, ";")
		case "number":
			t, _ = plainNumber(t)
		}
		if t == v {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(props))
			for kk, vv := range props {
				out[kk] = vv
			}
		}
		out[k] = t
	}
	if out == nil {
		return props
	}
	return out
}

// reshapeable reports whether asSent may change v, whatever its property:
// blank ends, or a number in a form HubSpot refuses.
func reshapeable(v string) bool {
	if blankEnds(v) {
		return true
	}
	_, ok := plainNumber(v)
	return ok
}

// numberRE is a decimal number, maybe signed, maybe with an exponent.
var numberRE = regexp.MustCompile(`^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$`)

// plainNumber is the decimal number v (with an exponent or a "+" sign) in
// the form HubSpot takes a number property's value: digits, an optional
// "-" and one "." ("1e-05" is 0.00001, "-1.5E+3" -1500, "+7" 7), exactly
// (no digit lost or added); ok is false when v is no such number (already
// in that form, or not a number: HubSpot judges it). An exponent beyond
// ±1000 is left as it is rather than written out in full.
func plainNumber(v string) (string, bool) {
	m := numberRE.FindStringSubmatch(v)
	if m == nil || m[2]+m[3] == "" {
		return v, false
	}
	hasExp := strings.ContainsAny(v, "eE")
	if !hasExp && m[1] != "+" {
		return v, false
	}
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(m[4])
		if err != nil || e > 1000 || e < -1000 {
			return v, false
		}
		exp = e
	}
	digits := m[2] + m[3]
	point := len(m[2]) + exp // where the decimal point falls in digits
	var whole, frac string
	switch {
	case point <= 0:
		whole, frac = "", strings.Repeat("0", -point)+digits
	case point >= len(digits):
		whole = digits + strings.Repeat("0", point-len(digits))
	default:
		whole, frac = digits[:point], digits[point:]
	}
	if whole = strings.TrimLeft(whole, "0"); whole == "" {
		whole = "0"
	}
	if hasExp {
		frac = strings.TrimRight(frac, "0")
	}
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if m[1] == "-" && strings.Trim(out, "0.") != "" {
		out = "-" + out
	}
	return out, true
}

// shapeValues applies asSent to the contacts among idx. The properties'
// types are read (once) only when a value may change (reshapeable); when
// they cannot be read, the records are not sent (rather than sent as they
// are and refused by HubSpot for good).
func (w *pageWrite) shapeValues(ctx context.Context, idx []int) error {
	need := false
	for _, i := range idx {
		for k, v := range w.contacts[i].props {
			if k != w.d.idProp && reshapeable(v) {
				need = true
			}
		}
	}
	if !need {
		return nil
	}
	defs, err := w.d.loadDefs(ctx)
	if err != nil {
		return err
	}
	for _, i := range idx {
		w.contacts[i].props = w.d.asSent(defs, w.contacts[i].props)
	}
	return nil
}

// idKey is how an id_property value is matched in answers: HubSpot
// lower-cases e-mail addresses.
func (d *Destination) idKey(v string) string {
	if d.idProp == "email" {
		return strings.ToLower(strings.TrimSpace(v))
	}
	return v
}

// op is the batch endpoint the write mode uses.
func (d *Destination) op() string {
	switch d.writeMode {
	case destination.Update:
		return "update"
	case destination.Create:
		return "create"
	}
	return "upsert"
}

// pageWrite is the state of one Write. Each index is written by one
// goroutine only.
type pageWrite struct {
	d        *Destination
	recs     []destination.Record
	contacts []contact
	results  []destination.Result
	done     []bool
	// maybeSent: a request carrying the record failed in a way that may
	// have reached HubSpot (in doubt unless settled).
	maybeSent []bool
}

func (w *pageWrite) set(i int, r destination.Result) { w.results[i], w.done[i] = r, true }

func (w *pageWrite) failed(idx []int, err error) error {
	if !errors.Is(err, destination.ErrNotSent) {
		for _, i := range idx {
			w.maybeSent[i] = true
		}
	}
	return err
}

// Write delivers recs with the write mode's batch endpoint (the package
// comment says how). On a page-level failure the results of records
// already settled are returned with the error, records provably never sent
// are NotSent, and the others are left out (in doubt).
func (d *Destination) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return notSent(recs), failure.Wrap(failure.DestinationUnavailable, fmt.Errorf("%w: %w", destination.ErrNotSent, err),
			"hubspot request interrupted")
	}
	w := &pageWrite{d: d, recs: recs, contacts: make([]contact, len(recs)), results: make([]destination.Result, len(recs)),
		done: make([]bool, len(recs)), maybeSent: make([]bool, len(recs))}
	var todo []int
	for i, r := range recs {
		w.contacts[i] = d.parseRecord(r)
		if w.contacts[i].invalid != "" {
			w.set(i, destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: w.contacts[i].invalid})
			continue
		}
		todo = append(todo, i)
	}
	err := w.shapeValues(ctx, todo)
	if err == nil && d.writeMode != destination.Create {
		err = w.clearBackwardStages(ctx, todo)
	}
	switch {
	case err != nil:
	case d.mode == ModeSingle:
		// Records of one contact go one after the other, in page order, so
		// that it keeps the one read last (as batches, which never name a
		// contact twice, do); side by side, whichever landed last won.
		chains := apiclient.Chains(todo, func(i int) string { return d.idKey(w.contacts[i].id) })
		err = apiclient.FanOutChains(ctx, chains, d.conc, func(ctx context.Context, i int) error {
			return w.batch(ctx, []int{i})
		})
		if err != nil && failure.CodeOf(err) == failure.Internal {
			err = d.interrupted(ctx, err)
		}
	default:
		for _, b := range d.batches(w.contacts, todo) {
			if err = w.batch(ctx, b); err != nil {
				break
			}
		}
	}
	if err != nil {
		for i, r := range recs {
			if !w.done[i] && !w.maybeSent[i] {
				w.set(i, destination.Result{Key: r.Key, Outcome: destination.NotSent})
			}
		}
	}
	out := make([]destination.Result, 0, len(recs))
	for i, r := range w.results {
		if w.done[i] {
			out = append(out, r)
		}
	}
	return out, err
}

// batches splits idx into batches of at most MaxBatch inputs, none naming
// the same contact twice (HubSpot refuses duplicate ids in a batch); a
// contact named again starts a new batch, so page order is kept.
func (d *Destination) batches(cs []contact, idx []int) [][]int {
	var (
		out  [][]int
		cur  []int
		seen = map[string]bool{}
	)
	for _, i := range idx {
		k := d.idKey(cs[i].id)
		if len(cur) == MaxBatch || seen[k] {
			out = append(out, cur)
			cur, seen = nil, map[string]bool{}
		}
		cur = append(cur, i)
		seen[k] = true
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func notSent(recs []destination.Record) []destination.Result {
	out := make([]destination.Result, len(recs))
	for i, r := range recs {
		out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
	}
	return out
}

// Batch request bodies (HubSpot's batch reference).
type (
	idInput struct {
		ID         string            `json:"id"`
		IDProperty string            `json:"idProperty,omitempty"`
		Properties map[string]string `json:"properties"`
	}
	propsInput struct {
		Properties map[string]string `json:"properties"`
	}
	inputs[T any] struct {
		Inputs []T `json:"inputs"`
	}
)

// batch sends one batch of idx with the write mode's endpoint and settles
// its records.
func (w *pageWrite) batch(ctx context.Context, idx []int) error {
	op := w.d.op()
	var body any
	switch op {
	case "create":
		in := make([]propsInput, len(idx))
		for n, i := range idx {
			in[n] = propsInput{Properties: w.contacts[i].props}
		}
		body = inputs[propsInput]{Inputs: in}
	default:
		in := make([]idInput, len(idx))
		for n, i := range idx {
			c := w.contacts[i]
			// The id names the contact (upsert sets it on a contact it
			// creates): it is not sent again as a property.
			in[n] = idInput{ID: c.id, IDProperty: w.d.idProp, Properties: withoutKey(c.props, w.d.idProp)}
		}
		body = inputs[idInput]{Inputs: in}
	}
	route := "POST /crm/v3/objects/contacts/batch/" + op
	resp, err := w.d.do(ctx, call{path: "/crm/v3/objects/contacts/batch/" + op, route: route, body: body})
	if err != nil {
		return w.failed(idx, err)
	}
	switch {
	case resp.Status >= 200 && resp.Status < 300:
		return w.settle(ctx, idx, op, resp)
	case (resp.Status == http.StatusBadRequest || resp.Status == http.StatusConflict || resp.Status == http.StatusUnprocessableEntity) &&
		decodeAPIError(route, resp.Status, resp.Body).HubSpots:
		ae := decodeAPIError(route, resp.Status, resp.Body)
		if len(idx) > 1 {
			// HubSpot refused the batch whole (nothing of it applied): one
			// by one, only the records at fault are refused.
			for _, i := range idx {
				if err := w.batch(ctx, []int{i}); err != nil {
					return err
				}
			}
			return nil
		}
		i := idx[0]
		if op == "create" && resp.Status == http.StatusConflict {
			w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Delivered, Skipped: destination.SkipExists})
			return nil
		}
		w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Rejected, Message: rejection(ae.Category, ae.Message, ae.Status)})
		return nil
	}
	return w.failed(idx, w.d.unexpected(decodeAPIError(route, resp.Status, resp.Body)))
}

func withoutKey(m map[string]string, k string) map[string]string {
	if _, ok := m[k]; !ok {
		return m
	}
	out := make(map[string]string, len(m))
	for kk, v := range m {
		if kk != k {
			out[kk] = v
		}
	}
	return out
}

// settle reads a 2xx batch answer: results are delivered, errors[] name
// the inputs HubSpot refused (or, for update, did not find). An input the
// answer does not account for leaves the batch in doubt.
func (w *pageWrite) settle(ctx context.Context, idx []int, op string, resp *apiclient.Response) error {
	var br batchResponse
	if err := json.Unmarshal(resp.Body, &br); err != nil {
		return w.failed(idx, failure.Wrap(failure.DestinationUnavailable, apiclient.ErrOutcomeUnknown,
			"HubSpot's answer to batch/%s could not be read", op))
	}
	if len(br.Errors) > 0 && resp.Status != http.StatusMultiStatus {
		// HubSpot lists refused inputs in a 207 only: errors[] in another
		// 2xx is not its answer, and rejects nothing.
		return w.failed(idx, failure.Wrap(failure.DestinationUnavailable, apiclient.ErrOutcomeUnknown,
			"HubSpot answered batch/%s with HTTP %d and errors; check the destination's base_url", op, resp.Status))
	}
	byID := make(map[string][]int, len(idx))
	for _, i := range idx {
		k := w.d.idKey(w.contacts[i].id)
		byID[k] = append(byID[k], i)
	}
	take := func(id string) (int, bool) {
		k := w.d.idKey(id)
		for n, i := range byID[k] {
			if !w.done[i] {
				byID[k] = append(byID[k][:n:n], byID[k][n+1:]...)
				return i, true
			}
		}
		return 0, false
	}
	var unmatched []object
	for _, o := range br.Results {
		v := o.Properties[w.d.idProp]
		if v == nil {
			unmatched = append(unmatched, o)
			continue
		}
		i, ok := take(*v)
		if !ok {
			unmatched = append(unmatched, o)
			continue
		}
		w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Delivered, Ref: o.ID})
	}
	var anonymous []batchError // errors that name no input of the batch
	for _, e := range br.Errors {
		named := false
		for _, id := range e.Context.IDs {
			i, ok := take(id)
			if !ok {
				continue
			}
			named = true
			if op == "update" && e.Category == "OBJECT_NOT_FOUND" {
				w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Delivered, Skipped: destination.SkipNotFound})
				continue
			}
			w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Rejected, Message: rejection(e.Category, e.Message, resp.Status)})
		}
		if !named {
			anonymous = append(anonymous, e)
		}
	}
	var left []int
	for _, i := range idx {
		if !w.done[i] {
			left = append(left, i)
		}
	}
	// Results that do not show the id_property (HubSpot returns the
	// properties it chooses), or show another one (a write by a secondary
	// address answers the contact under its primary one), are matched in
	// order, when they account for exactly the inputs left and every error
	// named its inputs (so the inputs left are the ones applied).
	if len(left) > 0 && len(left) == len(unmatched) && len(anonymous) == 0 {
		for n, i := range left {
			w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Delivered, Ref: unmatched[n].ID})
		}
		return nil
	}
	// Errors that do not say which inputs they are about, when every
	// result is accounted for: the inputs left were refused, not applied
	// (HubSpot lists what it applied). Alone, an input takes the error;
	// several are sent again one by one to learn which is which.
	if len(left) > 0 && len(unmatched) == 0 && len(anonymous) > 0 {
		if len(left) == 1 {
			e := anonymous[0]
			i := left[0]
			if op == "update" && e.Category == "OBJECT_NOT_FOUND" {
				w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Delivered, Skipped: destination.SkipNotFound})
			} else {
				w.set(i, destination.Result{Key: w.recs[i].Key, Outcome: destination.Rejected, Message: rejection(e.Category, e.Message, resp.Status)})
			}
			return nil
		}
		for _, i := range left {
			if err := w.batch(ctx, []int{i}); err != nil {
				return err
			}
		}
		return nil
	}
	if len(left) > 0 {
		return w.failed(left, failure.Wrap(failure.DestinationUnavailable, apiclient.ErrOutcomeUnknown,
			"HubSpot's answer to batch/%s did not account for %d of its inputs", op, len(left)))
	}
	return nil
}

// lifecycleStage is the contact property HubSpot only moves forward: a
// write of an earlier stage than the contact's is ignored, with a success
// (fakehubspot's package comment cites HubSpot). Counted delivered, the
// contact would keep its old stage, so such a stage is cleared first.
const lifecycleStage = "lifecyclestage"

// defaultStages are lifecyclestage's default options in their order, for
// when the account's cannot be read.
var defaultStages = []string{"subscriber", "lead", "marketingqualifiedlead", "salesqualifiedlead",
	"opportunity", "customer", "evangelist", "other"}

// clearBackwardStages clears the lifecycle stage of the contacts among idx
// whose record sets an earlier stage than they hold (read with batch/read;
// the order is the property's options'), with batch/update by contact id,
// so that the write that follows sets it. A clear whose outcome is unknown
// leaves its records in doubt: a read-back then finds the stage not set,
// and the record is sent again.
func (w *pageWrite) clearBackwardStages(ctx context.Context, idx []int) error {
	var (
		ids  []string
		seen = map[string]bool{}
	)
	for _, i := range idx {
		c := w.contacts[i]
		if c.props[lifecycleStage] == "" || seen[w.d.idKey(c.id)] {
			continue
		}
		seen[w.d.idKey(c.id)] = true
		ids = append(ids, c.id)
	}
	if len(ids) == 0 {
		return nil
	}
	order := w.d.propertyDefs(ctx)[lifecycleStage].options
	if len(order) == 0 {
		order = defaultStages
	}
	found, err := w.d.read(ctx, ids, []string{w.d.idProp, lifecycleStage})
	if err != nil {
		return err
	}
	var (
		clear   []idInput
		touched []int
		queued  = map[string]bool{}
	)
	for _, i := range idx {
		want := w.contacts[i].props[lifecycleStage]
		o, ok := found[w.d.idKey(w.contacts[i].id)]
		if want == "" || !ok || o.Properties[lifecycleStage] == nil {
			continue
		}
		cur, next := slices.Index(order, *o.Properties[lifecycleStage]), slices.Index(order, want)
		if cur < 0 || next < 0 || next >= cur {
			continue
		}
		touched = append(touched, i)
		if !queued[o.ID] {
			queued[o.ID] = true
			clear = append(clear, idInput{ID: o.ID, Properties: map[string]string{lifecycleStage: ""}})
		}
	}
	const route = "POST /crm/v3/objects/contacts/batch/update"
	for from := 0; from < len(clear); from += MaxBatch {
		resp, err := w.d.do(ctx, call{path: "/crm/v3/objects/contacts/batch/update", route: route,
			body: inputs[idInput]{Inputs: clear[from:min(from+MaxBatch, len(clear))]}})
		if err != nil {
			return w.failed(touched, err)
		}
		var br batchResponse
		if resp.Status < 200 || resp.Status > 299 || json.Unmarshal(resp.Body, &br) != nil {
			return w.failed(touched, w.d.unexpected(decodeAPIError(route, resp.Status, resp.Body)))
		}
		for _, e := range br.Errors {
			// A contact gone since the read is created by the write.
			if e.Category != "OBJECT_NOT_FOUND" {
				return w.failed(touched, w.d.unexpected(&APIError{Route: route, Status: resp.Status, Category: e.Category, Message: e.Message}))
			}
		}
	}
	return nil
}
