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
	"strconv"
	"strings"
	"sync"
	"time"

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
	// processPollInterval is the pause between two GET /processes.
	processPollInterval = 2 * time.Second
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
// /contacts/{email} each. Larger sets, and every set in bulk mode, are
// settled by first waiting (bounded by Params.VerifyWait) for running import
// processes (GET /processes) and then paging GET /contacts modified since
// since minus 5 minutes, sorted by creation so that concurrent inserts do not
// shift the pages.
//
// A record landed when a contact with its e-mail (case-insensitive) is in
// every configured list and has every mapped attribute (attribute names
// case-insensitive) with an equal value. Values are compared after a JSON
// round trip:
//   - a mapped null or "" is not compared (Brevo does not store empty values
//     when emptyContactsAttributes is false);
//   - numbers and numeric strings are equal when they are the same decimal
//     number (42 == "42" == "42.0"; exact, no float rounding);
//   - booleans equal true/false or a string strconv.ParseBool reads alike;
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
	if d.mode == ModeSingle && len(cands) <= verifyEachMax {
		if err := d.verifyEach(ctx, cands, landed); err != nil {
			return nil, err
		}
		return landed, nil
	}
	if d.mode == ModeBulk {
		if err := d.waitImports(ctx); err != nil {
			return nil, err
		}
	}
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
			return nil, failure.Wrap(failure.DestinationUnavailable, ErrNoVerify,
				"more than %d contacts changed since the in-doubt write", verifyMaxPages*verifyPageSize)
		}
		q.Set("offset", strconv.Itoa(page*verifyPageSize))
		resp, err := d.do(ctx, request{method: http.MethodGet, path: "/contacts", route: "GET /contacts", query: q})
		if err != nil {
			return nil, d.verifyError(err)
		}
		var list struct {
			Contacts []contactDetails `json:"contacts"`
			Count    int64            `json:"count"`
		}
		if err := decodeNumbers(resp.body, &list); err != nil {
			return nil, failure.Wrap(failure.DestinationUnavailable, errors.New("undecodable contact list"), "brevo answered GET /contacts with an unexpected body")
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
	// A few records not seen in the window (a write that changed nothing may
	// leave modifiedAt alone) are looked up one by one.
	if n := len(want); n > 0 && n <= verifyEachMax {
		var rest []cand
		for _, idx := range want {
			for _, i := range idx {
				rest = append(rest, cands[i])
			}
		}
		if err := d.verifyEach(ctx, rest, landed); err != nil {
			return nil, err
		}
	}
	return landed, nil
}

type cand struct {
	rec destination.Record
	c   contact
}

// verifyEach looks cands up one GET /contacts/{email} each, adding the landed
// ones to landed.
func (d *Destination) verifyEach(ctx context.Context, cands []cand, landed map[string]string) error {
	var mu sync.Mutex
	err := runParallel(ctx, len(cands), d.conc, func(ctx context.Context, i int) error {
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
		return failure.Wrap(failure.DestinationUnavailable, d.safe(apiErr), "brevo refused a verification request")
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
		if apiErr, ok := err.(*APIError); ok && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusBadRequest) {
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

// waitImports waits, within VerifyWait, until no import process is queued
// or in process, so that a landed import is visible before comparing.
func (d *Destination) waitImports(ctx context.Context) error {
	q := url.Values{}
	q.Set("limit", "50")
	q.Set("sort", "desc")
	polls := int(d.verifyWait / processPollInterval)
	for poll := 0; ; poll++ {
		resp, err := d.do(ctx, request{method: http.MethodGet, path: "/processes", route: "GET /processes", query: q})
		if err != nil {
			return d.verifyError(err)
		}
		var list struct {
			Processes []struct {
				Status string `json:"status"`
				Name   string `json:"name"`
			} `json:"processes"`
		}
		if err := json.Unmarshal(resp.body, &list); err != nil {
			return failure.Wrap(failure.DestinationUnavailable, errors.New("undecodable process list"), "brevo answered GET /processes with an unexpected body")
		}
		running := false
		for _, p := range list.Processes {
			if p.Status != "completed" && (p.Name == "" || strings.Contains(strings.ToUpper(p.Name), "IMPORT")) {
				running = true
				break
			}
		}
		if !running {
			return nil
		}
		if poll >= polls {
			return failure.Wrap(failure.DestinationUnavailable, ErrNoVerify,
				"a brevo import process was still running after %s", d.verifyWait)
		}
		if err := d.sleep(ctx, processPollInterval); err != nil {
			return d.interrupted(ctx, err)
		}
	}
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
	upper := make(map[string]any, len(got.Attributes))
	for k, v := range got.Attributes {
		upper[strings.ToUpper(k)] = v
	}
	for k, want := range c.attrs {
		w := canonical(want)
		if w == nil || w == "" {
			continue
		}
		g, ok := upper[strings.ToUpper(k)]
		if !ok || !ValuesEqual(w, g) {
			return false
		}
	}
	return true
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
