package brevo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

const (
	// verifyEachMax is the largest set verified with one GET per contact;
	// larger sets (and every bulk-mode set) page GET /contacts instead.
	verifyEachMax = 20
	// modifiedSinceMargin is subtracted from since to absorb clock skew
	// between oncesync and Brevo.
	modifiedSinceMargin = 5 * time.Minute
	// verifyPageSize is Brevo's maximum page of GET /contacts.
	verifyPageSize = 1000
	// verifyMaxPages bounds the contacts read by one Verify (1M contacts).
	verifyMaxPages = 1000
	// processPollInterval is the pause between two polls of the running
	// imports.
	processPollInterval = 2 * time.Second
	// maxWaitedImports bounds the running imports Verify polls.
	maxWaitedImports = 20
	// modifiedSinceLayout is Brevo's date-time format (YYYY-MM-DDTHH:mm:ss.SSSZ, UTC).
	modifiedSinceLayout = "2006-01-02T15:04:05.000Z"
)

// contactDetails is the part of Brevo's getContactDetails oncesync compares.
type contactDetails struct {
	Email      string         `json:"email"`
	ID         json.Number    `json:"id"`
	ListIDs    []int64        `json:"listIds"`
	Attributes map[string]any `json:"attributes"`
}

// Verify reports which records already landed in Brevo with exactly their
// mapped data, keyed by record key with the contact id as Ref.
//
// Up to 20 records on the single path are looked up one GET
// /contacts/{email} each. Larger sets, and every set in bulk mode, page
// GET /contacts modified since since minus 5 minutes, sorted by creation so
// that concurrent inserts do not shift the pages.
//
// In bulk mode the in-doubt page's import may still be running. An in-doubt
// page whose process id is known is settled by Outcomes, not here; Verify
// serves the page whose 202 was lost, so it cannot tell its import from
// another sync's or a person's. So, before reading the contacts, it notes
// the import processes then queued or running (the newest 50 processes,
// IMPORTUSER only; at most 20 of them): the page's own import, if it reached
// Brevo, is among them or already done, and no import started later can be
// it. When records are missing, it polls those processes only (every 2 s,
// within Params.VerifyWait), and reads the missing records again each time
// one of them ends, returning as soon as every record landed or none of
// them runs. Another sync's import, however long, never makes Verify fail:
// past VerifyWait it answers with what landed.
//
// The residual risk: the records of a page whose import is still queued or
// running past VerifyWait (behind a long import), or that was not among the
// noted processes (50 newer processes since), are reported not landed and
// sent again; when that import runs, it writes the same values a second
// time (a duplicate write, never a lost record). The value is stale only if
// Brevo ran that old import after a newer import carrying a newer value of
// the same contact; Brevo does not document the order of an account's
// imports.
//
// A record landed when a contact with its e-mail (case-insensitive) is in
// every configured list, has its ext_id (Brevo shows it as the EXT_ID
// attribute) and has every mapped attribute (attribute names
// case-insensitive) with an equal value. Values are compared after a JSON
// round trip:
//   - a mapped null or "" holds when Brevo has no value (or an empty one)
//     for the attribute: imports are sent with emptyContactsAttributes, so
//     a value cleared in the source is erased;
//   - numbers and numeric strings are equal when they are the same decimal
//     number (42 == "42" == "42.0"; exact, no float rounding);
//   - booleans equal true/false or a string strconv.ParseBool reads alike,
//     and a mapped 1 or 0 equals true or false; a boolean attribute's
//     value is read as the write sent it (typedValue: "tRuE" is true);
//   - an SMS number equals Brevo's form of it (samePhone: "+33 6 12 34 56
//     78" is kept as 33612345678);
//   - a float attribute's value equals the double nearest it (Brevo keeps
//     a double: 0.1234567890123456789 comes back as 0.12345678901234568);
//   - other strings compare exactly; objects and arrays deeply.
//
// Anything else (a missing contact, a differing value, a record without an
// e-mail) is "not landed": oncesync then writes it again, which at worst
// repeats a write and never loses one.
func (d *Destination) Verify(ctx context.Context, recs []destination.Record, since time.Time) (map[string]string, error) {
	landed := make(map[string]string)
	var cands []cand
	for _, r := range recs {
		c := parseRecord(r)
		if c.invalid != "" || c.email == "" {
			continue
		}
		cands = append(cands, cand{r, c})
	}
	if len(cands) == 0 {
		return landed, nil
	}
	// The attributes' types, for comparing a float attribute's value as
	// the double Brevo keeps (matches); a failure here is met by the reads.
	_, _ = d.ensureAttributes(ctx)
	if d.mode == ModeSingle && len(cands) <= verifyEachMax {
		if err := d.verifyEach(ctx, cands, landed); err != nil {
			return nil, err
		}
		return landed, nil
	}
	var (
		imports []int64
		// unsettled: imports still ran when the wait for them ended,
		// any of which may write over an EarlierInDoubt record.
		unsettled bool
	)
	if d.mode == ModeBulk {
		// Noted before the contacts are read: an import that ends in
		// between is then either seen landed or waited for.
		var err error
		if imports, err = d.runningImports(ctx); err != nil {
			return nil, err
		}
		if len(imports) > 0 && slices.ContainsFunc(cands, func(c cand) bool { return c.rec.EarlierInDoubt }) {
			// A row changed back to the values Brevo holds would be
			// found at once, while an import carrying its other value
			// may still run and write over them: let the imports end
			// first (within VerifyWait), then read.
			if imports, err = d.awaitImports(ctx, imports); err != nil {
				return nil, err
			}
			unsettled = len(imports) > 0
		}
	}
	// While imports run, records not seen in the listing are looked up one
	// by one only once the wait is over (waitImports).
	if err := d.verifyList(ctx, cands, since, landed, len(imports) == 0); err != nil {
		return nil, err
	}
	if len(imports) > 0 {
		if err := d.waitImports(ctx, imports, cands, since, landed); err != nil {
			return nil, err
		}
	}
	if unsettled {
		// Such a record found is not proof: it is reported not landed
		// and written again, its import queued behind the one that may
		// carry the other value, and no longer waited for here.
		for _, c := range cands {
			if c.rec.EarlierInDoubt {
				delete(landed, c.rec.Key)
			}
		}
	}
	return landed, nil
}

// verifyList settles cands by paging GET /contacts modified since since
// (minus a margin), adding the landed ones to landed. With lookUpRest, up to
// verifyEachMax records the listing did not show are then looked up one by
// one.
func (d *Destination) verifyList(ctx context.Context, cands []cand, since time.Time, landed map[string]string, lookUpRest bool) error {
	want := make(map[string][]int) // lower-cased email -> indexes in cands
	for i, c := range cands {
		e := strings.ToLower(c.c.email)
		want[e] = append(want[e], i)
	}
	q := url.Values{}
	q.Set("limit", strconv.Itoa(verifyPageSize))
	q.Set("sort", "asc")
	q.Set("modifiedSince", since.Add(-modifiedSinceMargin).UTC().Format(modifiedSinceLayout))
	for page := 0; len(want) > 0; page++ {
		if page == verifyMaxPages {
			return failure.Wrap(failure.DestinationUnavailable, ErrNoVerify,
				"more than %d contacts changed since the in-doubt write", verifyMaxPages*verifyPageSize)
		}
		q.Set("offset", strconv.Itoa(page*verifyPageSize))
		resp, err := d.do(ctx, request{method: http.MethodGet, path: "/contacts", route: "GET /contacts", query: q})
		if err != nil {
			return d.verifyError(err)
		}
		var list struct {
			Contacts []contactDetails `json:"contacts"`
			Count    int64            `json:"count"`
		}
		if err := decodeNumbers(resp.body, &list); err != nil {
			return failure.Wrap(failure.DestinationUnavailable, errors.New("undecodable contact list"), "brevo answered GET /contacts with an unexpected body")
		}
		for _, got := range list.Contacts {
			e := strings.ToLower(strings.TrimSpace(got.Email))
			idx, ok := want[e]
			if !ok {
				continue
			}
			for _, i := range idx {
				if d.matches(cands[i].c, got) {
					landed[cands[i].rec.Key] = got.ID.String()
				}
			}
			delete(want, e)
		}
		if len(list.Contacts) < verifyPageSize || int64((page+1)*verifyPageSize) >= list.Count {
			break
		}
	}
	// A record whose values Brevo held before the write in doubt, not seen
	// in the window, was left untouched by that write: its values are
	// there (a row changed back after a kill; looking each up, or sending
	// them again, wrote 283 of 297 a second time in an independent check,
	// 2026-12-06). An import that may still carry its other value is
	// waited for by the caller (EarlierInDoubt).
	for e, idx := range want {
		held := true
		for _, i := range idx {
			held = held && cands[i].rec.HeldBefore
		}
		if !held {
			continue
		}
		for _, i := range idx {
			landed[cands[i].rec.Key] = destination.RefUnchanged
		}
		delete(want, e)
	}
	// A few records not seen in the window (a write that changed nothing may
	// leave modifiedAt alone) are looked up one by one.
	if n := len(want); lookUpRest && n > 0 && n <= verifyEachMax {
		var rest []cand
		for _, idx := range want {
			for _, i := range idx {
				rest = append(rest, cands[i])
			}
		}
		return d.verifyEach(ctx, rest, landed)
	}
	return nil
}

type cand struct {
	rec destination.Record
	c   contact
}

// verifyEach looks cands up one GET /contacts/{email} each, adding the landed
// ones to landed.
func (d *Destination) verifyEach(ctx context.Context, cands []cand, landed map[string]string) error {
	var mu sync.Mutex
	err := apiclient.FanOut(ctx, len(cands), d.conc, func(ctx context.Context, i int) error {
		got, ok, err := d.getContact(ctx, cands[i].c.email)
		if err != nil || !ok {
			return err
		}
		if d.matches(cands[i].c, got) {
			mu.Lock()
			landed[cands[i].rec.Key] = got.ID.String()
			mu.Unlock()
		}
		return nil
	})
	if err != nil && failure.CodeOf(err) == failure.Internal {
		err = d.interrupted(ctx, err)
	}
	return err
}

// verifyError turns a 4xx the caller must judge into a page-level failure.
func (d *Destination) verifyError(err error) error {
	if apiErr, ok := err.(*APIError); ok { // do returns it bare for the caller to judge
		if !apiErr.Brevos {
			// A base_url without /v3 (or another server's) answered
			// "404 page not found" to the first read: "refused a
			// verification request" sent a person to Brevo. A 404 or 405
			// is no outage but a sync pointed elsewhere: the sync's owner's
			// to fix, and counted by the breaker (it was the operator's,
			// and "each call was already retried" was untrue: an
			// independent check, 2026-12-06).
			code := failure.DestinationUnavailable
			if apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusMethodNotAllowed {
				code = failure.InvalidSyncDefinition
			}
			return failure.Wrap(code, d.safe(apiErr),
				"something other than Brevo's API answered HTTP %d to %s (not in Brevo's words): check the destination's base_url (Brevo's is %s) and what stands between oncesync and it",
				apiErr.Status, apiErr.Route, DefaultBaseURL)
		}
		return failure.Wrap(failure.DestinationUnavailable, d.safe(apiErr), "brevo refused a verification request (HTTP %d to %s)", apiErr.Status, apiErr.Route)
	}
	return err
}

// getContact reads GET /contacts/{email}; ok is false when there is none.
func (d *Destination) getContact(ctx context.Context, email string) (contactDetails, bool, error) {
	var got contactDetails
	resp, err := d.do(ctx, request{
		method: http.MethodGet,
		path:   "/contacts/" + escapeIdentifier(email),
		route:  "GET /contacts/{identifier}",
	})
	if err != nil {
		if apiErr, ok := err.(*APIError); ok && apiErr.says(http.StatusNotFound, http.StatusBadRequest) {
			return got, false, nil
		}
		return got, false, d.verifyError(err)
	}
	if err := decodeNumbers(resp.body, &got); err != nil {
		return got, false, failure.Wrap(failure.DestinationUnavailable, errors.New("undecodable contact"), "brevo answered GET /contacts/{identifier} with an unexpected body")
	}
	return got, true, nil
}

// escapeIdentifier URL-encodes an e-mail for the path (@ and + included).
func escapeIdentifier(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// runningImports returns the ids of the import processes queued or running
// now (IMPORTUSER among the newest 50 processes; the newest
// maxWaitedImports of them): the only ones Verify may wait for.
func (d *Destination) runningImports(ctx context.Context) ([]int64, error) {
	// Paced like every process read (processBoard.mayRead): a read-back
	// polled outside the pace spent the budget's reserve (an independent
	// check, brevo35).
	for {
		wait, err := d.board.mayRead(d.clock.Now(), "list the account's running imports")
		if err != nil {
			return nil, err
		}
		if wait == 0 {
			break
		}
		if err := d.sleep(ctx, wait); err != nil {
			return nil, d.interrupted(ctx, err)
		}
	}
	list, err := d.listProcesses(ctx, maxProcessList)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, p := range list {
		if running(p.Status) && (p.Name == "" || strings.Contains(strings.ToUpper(p.Name), "IMPORT")) && len(ids) < maxWaitedImports {
			ids = append(ids, p.ID)
		}
	}
	return ids, nil
}

func running(status string) bool {
	switch status {
	case statusQueued, statusInProcess, statusProcessing:
		return true
	}
	return false
}

// awaitImports polls the processes of ids (processes) every
// processPollInterval within VerifyWait, until none of them runs, and
// returns those still running when it gave up.
func (d *Destination) awaitImports(ctx context.Context, ids []int64) ([]int64, error) {
	polls := int(d.verifyWait / processPollInterval)
	for poll := 0; poll < polls && len(ids) > 0; poll++ {
		var err error
		if ids, err = d.pollImports(ctx, ids); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// pollImports waits processPollInterval and returns those of ids whose
// processes still run.
func (d *Destination) pollImports(ctx context.Context, ids []int64) ([]int64, error) {
	if err := d.sleep(ctx, processPollInterval); err != nil {
		return nil, d.interrupted(ctx, err)
	}
	ps, paced, err := d.processes(ctx, ids)
	switch {
	case err != nil:
		return nil, err
	case paced:
		return ids, nil // not asked: as running as they were
	}
	var still []int64
	for _, id := range ids {
		if p, ok := ps[id]; ok && running(p.Status) {
			still = append(still, id)
		}
	}
	return still, nil
}

// waitImports polls the processes of ids (processes) every processPollInterval
// within VerifyWait, while some cands are not landed. Each time one of them
// ends, the missing cands are read again. Past VerifyWait it returns with
// what landed: a foreign import never fails Verify (see Verify for the
// residual risk).
func (d *Destination) waitImports(ctx context.Context, ids []int64, cands []cand, since time.Time, landed map[string]string) error {
	missing := func() []cand {
		var out []cand
		for _, c := range cands {
			if _, ok := landed[c.rec.Key]; !ok {
				out = append(out, c)
			}
		}
		return out
	}
	recheck := func(rest []cand) error {
		if len(rest) <= verifyEachMax {
			return d.verifyEach(ctx, rest, landed)
		}
		return d.verifyList(ctx, rest, since, landed, true)
	}
	rest := missing()
	rechecked := false // rest was read again after the last import ended
	polls := int(d.verifyWait / processPollInterval)
	for poll := 0; poll < polls && len(rest) > 0 && len(ids) > 0; poll++ {
		still, err := d.pollImports(ctx, ids)
		if err != nil {
			return err
		}
		if len(still) == len(ids) {
			continue
		}
		ids = still
		if err := recheck(rest); err != nil {
			return err
		}
		rest, rechecked = missing(), true
	}
	if !rechecked && len(rest) > 0 {
		// No import ended: the records the first listing missed are looked
		// up one by one (a write that changed nothing may leave modifiedAt
		// alone).
		return recheck(rest)
	}
	return nil
}

// matches reports whether got holds exactly c's mapped data (see Verify).
func (d *Destination) matches(c contact, got contactDetails) bool {
	if !strings.EqualFold(strings.TrimSpace(got.Email), c.email) {
		return false
	}
	for _, id := range d.listIDs {
		found := false
		for _, g := range got.ListIDs {
			if g == id {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	d.attrMu.Lock()
	types := d.attrTypes
	d.attrMu.Unlock()
	upper := make(map[string]any, len(got.Attributes))
	for k, v := range got.Attributes {
		upper[strings.ToUpper(k)] = v
	}
	if c.extID != "" {
		// An import keeps EXT_ID without its outer spaces (the fake models
		// it): compared without them, or an in-doubt page would be written
		// again.
		if g, ok := upper[extIDAttribute]; !ok || !ValuesEqual(strings.TrimSpace(c.extID), trimText(g)) {
			return false
		}
	}
	if g, ok := upper[extIDAttribute]; c.clearExtID && ok && !empty(canonical(g)) {
		return false // cleared in the source, still held
	}
	for k, want := range c.attrs {
		w := canonical(want)
		g, ok := upper[strings.ToUpper(k)]
		if empty(w) {
			// Cleared in the source: Brevo must hold nothing for it
			// (docs/guide.md#a-value-cleared-in-the-source).
			if ok && !empty(g) {
				return false
			}
			continue
		}
		if strings.EqualFold(k, smsAttribute) {
			if !ok || !samePhone(w, g) {
				return false
			}
			continue
		}
		if types[k].typ == "float" && ok && sameDouble(w, g) {
			continue
		}
		if at := types[k]; at.typ == categoryCategory {
			if !ok || !sameOption(at.options, w, g) {
				return false
			}
			continue
		}
		switch types[k].typ {
		case "text":
			if tv, isText := textValue(w); isText {
				w = tv // as it was sent (typeValues)
			}
		case "boolean":
			if tv, ok := typedValue("boolean", w); ok {
				w = tv // as it was sent ("tRuE" as true: typeValues)
			}
		}
		if !ok || !ValuesEqual(w, g) {
			return false
		}
	}
	return true
}

// sameOption reports whether a category attribute's mapped value and
// Brevo's name the same option: Brevo holds its number (what a write
// sends, categoryValue); its label is taken too, in case a contact is read
// back with it.
func sameOption(opts []option, want, got any) bool {
	w, ok := categoryValue(opts, want)
	if !ok {
		return false
	}
	g, ok := categoryValue(opts, got)
	return ok && g == w
}

// sameDouble reports whether a float attribute's mapped value and Brevo's
// are the same double: Brevo keeps a float attribute as one, so a value
// with more digits than a double holds (a NUMERIC(30,20), an integer
// above 2^53) comes back as its nearest double.
func sameDouble(want, got any) bool {
	double := func(v any) (float64, bool) {
		var s string
		switch x := v.(type) {
		case json.Number:
			s = x.String()
		case string:
			s = strings.TrimSpace(x)
		default:
			return 0, false
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil && validNumber(s)
	}
	a, ok1 := double(want)
	b, ok2 := double(got)
	return ok1 && ok2 && a == b
}

// trimText is v without outer spaces when it is text.
func trimText(v any) any {
	if s, ok := v.(string); ok {
		return strings.TrimSpace(s)
	}
	return v
}

// ValuesEqual reports whether a mapped attribute value and the value Brevo
// returned are the same, tolerating JSON number/string/bool representation
// differences as documented on Verify.
func ValuesEqual(want, got any) bool {
	w, g := canonical(want), canonical(got)
	switch wv := w.(type) {
	case string:
		switch gv := g.(type) {
		case string:
			return wv == gv
		case json.Number:
			return numEqual(wv, gv.String())
		case bool:
			b, err := strconv.ParseBool(strings.TrimSpace(wv))
			return err == nil && b == gv
		}
		return false
	case json.Number:
		switch gv := g.(type) {
		case string:
			return numEqual(wv.String(), gv)
		case json.Number:
			return numEqual(wv.String(), gv.String())
		case bool:
			b, ok := numberBool(wv.String())
			return ok && b == gv
		}
		return false
	case bool:
		switch gv := g.(type) {
		case bool:
			return wv == gv
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(gv))
			return err == nil && b == wv
		}
		return false
	}
	return reflect.DeepEqual(w, g)
}

// empty reports whether v is no value: null or "".
func empty(v any) bool { return v == nil || v == "" }

func numEqual(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(strings.TrimSpace(a))
	y, ok2 := new(big.Rat).SetString(strings.TrimSpace(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}

// canonical returns v as encoding/json decodes it with UseNumber (string,
// json.Number, bool, nil, map[string]any, []any).
func canonical(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if decodeNumbers(b, &out) != nil {
		return v
	}
	return out
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
