// Package shopify is the `shopify` source: the customers of a Shopify
// store, read through the GraphQL Admin API (docs/config.md#shopify-source).
//
// A run is a pass over the customers connection sorted by UPDATED_AT (ties
// by id), paged with first/after. The cursor keeps Shopify's cursor within
// the pass, the latest updatedAt read (T) and the customers read in the
// minute before it (id, updatedAt, hash of the record); at the end of a
// pass it becomes the start of the next one: query "updated_at:>='T-1m'"
// (the search index lags writes), skipping the customers read then whose
// record has not changed since (docs/guide.md#shopify-customers); once a
// pass began (Shopify's Date) more than the look-back after T, the next
// keeps only those updated after T. Shopify's updated_at filter may match
// whole days, so the source asks it for a superset ("updated_at:>='...'")
// and applies the exact bound itself. A
// customer updated during a pass moves to the end of the sort and is read
// again before the pass ends, so nothing changed is missed.
//
// Requests go through apiclient (retries of 5xx and lost answers, 429 with
// Retry-After, no redirects, the token scrubbed from errors). Before each
// request the source waits until the cost bucket Shopify reported
// (extensions.cost.throttleStatus) covers the query's cost, and a THROTTLED
// answer is waited out the same way, on the injected clock.
package shopify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/source"
)

// Defaults.
const (
	DefaultAPIVersion = "2026-10"
	// MaxPageSize is the largest first Shopify takes.
	MaxPageSize = 250
	// DefaultMaxRecordBytes bounds one record (its JSON encoding).
	DefaultMaxRecordBytes = 1 << 20
	// maxBody bounds one answer: 250 customers of Shopify's sizes (a note,
	// 250 tags) are far below it.
	maxBody = 32 << 20
	// maxThrottled bounds THROTTLED answers in a row for one request.
	maxThrottled = 20
	// DefaultLookback is how far before the last instant read the next
	// pass starts (cursor_lookback): the query filter reads Shopify's
	// search index, which follows writes with a delay that is not the same
	// for every customer and that Shopify does not bound, so a customer
	// updated before that instant may be indexed after the pass went by.
	// Those customers are read again (the ledger finds the unchanged ones
	// and sends nothing). One minute lost a customer indexed three minutes
	// late (TestIndexLagWithinTheLookback); lags of many minutes are
	// reported (docs/guide.md#sources).
	DefaultLookback = 15 * time.Minute
	// seenWindow is the least a cursor's memory of the customers read
	// reaches before the last instant read (else the look-back), so that
	// the next pass skips those it reads unchanged; more than maxSeen of
	// them are read again and replayed from the ledger.
	seenWindow = time.Minute
	// maxSeen bounds the customers of the look-back window a cursor
	// remembers (the newest); the others are read again at the next run
	// (the ledger finds them unchanged and sends nothing).
	maxSeen = 64
)

// Params configure a Source.
type Params struct {
	// ShopURL is https://NAME.myshopify.com (or a fake's URL).
	ShopURL string
	// Token is the Admin API access token (X-Shopify-Access-Token).
	Token string
	// APIVersion is the Admin API version (default DefaultAPIVersion).
	APIVersion string
	// Identity is the sync's identity column; only "id" is supported.
	Identity string
	// MaxRecordBytes bounds each record's JSON size (0 = 1 MiB); a larger
	// customer fails the page with source.ErrInvalid.
	MaxRecordBytes int
	// Lookback is how far before the last customer read a pass starts
	// (cursor_lookback; 0 = DefaultLookback, negative = none).
	Lookback time.Duration
	// Client, Clock, Sleep, Backoff and MaxRetries are apiclient's (tests
	// inject a fake clock and a Sleep that advances it).
	Client     *http.Client
	Clock      clock.Clock
	Sleep      func(ctx context.Context, d time.Duration) error
	Backoff    func(attempt int) time.Duration
	MaxRetries int
}

// Source reads a shop's customers.
type Source struct {
	p        Params
	id       string
	endpoint string
	api      *apiclient.Client

	mu       sync.Mutex
	throttle throttle
}

var versionRE = regexp.MustCompile(`^(\d{4}-(01|04|07|10)|unstable)$`)

// New returns a Source for p. Nothing is requested until the first read.
func New(p Params) (*Source, error) {
	if p.APIVersion == "" {
		p.APIVersion = DefaultAPIVersion
	}
	if p.Identity == "" {
		p.Identity = "id"
	}
	if p.MaxRecordBytes <= 0 {
		p.MaxRecordBytes = DefaultMaxRecordBytes
	}
	switch {
	case p.Lookback == 0:
		p.Lookback = DefaultLookback
	case p.Lookback < 0:
		p.Lookback = 0
	}
	if p.Clock == nil {
		p.Clock = clock.Real{}
	}
	if p.Sleep == nil {
		p.Sleep = clock.Sleep
	}
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(p.ShopURL), "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("shopify: %w: shop_url must be https://NAME.myshopify.com", source.ErrInvalid)
	}
	if !versionRE.MatchString(p.APIVersion) {
		return nil, fmt.Errorf("shopify: %w: api_version must look like "+DefaultAPIVersion, source.ErrInvalid)
	}
	if p.Token == "" {
		return nil, fmt.Errorf("shopify: %w: access_token is empty", source.ErrInvalid)
	}
	s := &Source{
		p:        p,
		id:       "shopify:" + u.Host + u.Path + "/customers",
		endpoint: u.String() + "/admin/api/" + p.APIVersion + "/graphql.json",
	}
	s.api = apiclient.New(apiclient.Params{
		Name: "shopify", Subject: "Shopify", URLSetting: "shop_url", Side: "source",
		AuthDetail: "Shopify refused the access token",
		Client:     p.Client, Clock: p.Clock, Sleep: p.Sleep, Backoff: p.Backoff, MaxRetries: p.MaxRetries,
		Secrets: []string{p.Token}, MaxBody: maxBody,
	})
	return s, nil
}

// ID names the shop and the resource; no token.
func (s *Source) ID() string { return s.id }

// Close releases idle connections.
func (s *Source) Close() error {
	s.api.CloseIdleConnections()
	return nil
}

// customerFields is the selection of a customer. Each object field costs a
// point per customer: three objects at first: 250 would cost 1,002 points,
// over Shopify's 1,000-point limit of one query.
const customerFields = `id firstName lastName note state tags verifiedEmail numberOfOrders createdAt updatedAt
      defaultEmailAddress { emailAddress } defaultPhoneNumber { phoneNumber }`

// nodeCost is a customer's cost in customerFields (itself and two objects).
const nodeCost = 3

const pageQuery = `query OncesyncCustomers($first: Int!, $after: String, $query: String) {
  customers(first: $first, after: $after, query: $query, sortKey: UPDATED_AT) {
    nodes { ` + customerFields + ` }
    pageInfo { hasNextPage endCursor }
  }
}`

// customerJSON is a customer as customerFields selects it.
type customerJSON struct {
	ID                  string   `json:"id"`
	FirstName           *string  `json:"firstName"`
	LastName            *string  `json:"lastName"`
	Note                *string  `json:"note"`
	State               *string  `json:"state"`
	Tags                []string `json:"tags"`
	VerifiedEmail       *bool    `json:"verifiedEmail"`
	NumberOfOrders      *string  `json:"numberOfOrders"`
	CreatedAt           string   `json:"createdAt"`
	UpdatedAt           string   `json:"updatedAt"`
	DefaultEmailAddress *struct {
		EmailAddress *string `json:"emailAddress"`
	} `json:"defaultEmailAddress"`
	DefaultPhoneNumber *struct {
		PhoneNumber *string `json:"phoneNumber"`
	} `json:"defaultPhoneNumber"`
}

const gidPrefix = "gid://shopify/Customer/"

// record maps a customer to the flat fields a mapping names.
func (c customerJSON) record() (source.Record, time.Time, error) {
	num, ok := strings.CutPrefix(c.ID, gidPrefix)
	if !ok || !validID(num) {
		return source.Record{}, time.Time{}, fmt.Errorf("%w: a customer has an id that is not a customer GID", source.ErrInvalid)
	}
	updated, err := time.Parse(time.RFC3339, c.UpdatedAt)
	if err != nil {
		return source.Record{}, time.Time{}, fmt.Errorf("%w: customer %s has an updatedAt that is not a time", source.ErrInvalid, num)
	}
	str := func(p *string) any {
		if p == nil {
			return nil
		}
		return *p
	}
	var email, phone any
	if c.DefaultEmailAddress != nil {
		email = str(c.DefaultEmailAddress.EmailAddress)
	}
	if c.DefaultPhoneNumber != nil {
		phone = str(c.DefaultPhoneNumber.PhoneNumber)
	}
	var verified any
	if c.VerifiedEmail != nil {
		verified = *c.VerifiedEmail
	}
	var orders any
	if c.NumberOfOrders != nil {
		orders = json.Number(*c.NumberOfOrders)
	}
	return source.Record{Fields: map[string]any{
		"id": num, "email": email, "firstName": str(c.FirstName), "lastName": str(c.LastName), "phone": phone,
		"note": str(c.Note), "state": str(c.State), "tags": strings.Join(c.Tags, ", "), "verifiedEmail": verified,
		"numberOfOrders": orders, "createdAt": c.CreatedAt, "updatedAt": c.UpdatedAt,
	}}, updated.UTC(), nil
}

var idRE = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)

// validID: a customer id as Shopify renders it (a positive int64, no sign,
// no leading zero).
func validID(s string) bool {
	if !idRE.MatchString(s) {
		return false
	}
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// ReadPage reads up to size customers (at most 250) at cursor.
func (s *Source) ReadPage(ctx context.Context, cursor string, size int) (source.Page, error) {
	if err := ctx.Err(); err != nil {
		return source.Page{}, fmt.Errorf("%s: %w", s.id, err)
	}
	pos, err := parseCursor(cursor)
	if err != nil {
		return source.Page{}, fmt.Errorf("%s: %w", s.id, err)
	}
	pos.window = s.p.Lookback
	size = min(max(size, 1), MaxPageSize)
	page := source.Page{Cursor: cursor}
	for {
		vars := map[string]any{"first": size}
		if pos.After != "" {
			vars["after"] = pos.After
		}
		// keep is the pass's exact lower bound; Shopify's filter is only
		// asked for a superset of it (see passBound).
		keep, query := s.passBound(pos)
		if query != "" {
			vars["query"] = query
		}
		// Only a pass's first request dates it: a pass resumed later must
		// not seem to have begun then.
		first := pos.After == "" && pos.Start == ""
		var data struct {
			Customers *struct {
				Nodes    []json.RawMessage `json:"nodes"`
				PageInfo struct {
					HasNextPage bool    `json:"hasNextPage"`
					EndCursor   *string `json:"endCursor"`
				} `json:"pageInfo"`
			} `json:"customers"`
		}
		date, err := s.queryDated(ctx, pageQuery, vars, 2+size*nodeCost, &data)
		if err != nil {
			return source.Page{}, err
		}
		if first && !date.IsZero() {
			pos.Start = date.UTC().Format(time.RFC3339)
		}
		if data.Customers == nil {
			return source.Page{}, fmt.Errorf("%s: %w: Shopify answered without customers", s.id, source.ErrUnavailable)
		}
		for _, raw := range data.Customers.Nodes {
			rec, updated, err := s.decode(raw)
			if err != nil {
				return source.Page{}, err
			}
			if !keep(updated) {
				continue // before the pass's bound: read by an earlier pass
			}
			skip, key := pos.skip(rec, updated)
			pos.saw(rec, key, updated)
			if !skip {
				page.Records = append(page.Records, rec)
			}
		}
		pi := data.Customers.PageInfo
		if pi.EndCursor != nil {
			pos.After = *pi.EndCursor
		}
		if !pi.HasNextPage {
			page.End = true
			page.Next = pos.nextPass().String()
			return page, nil
		}
		if pi.EndCursor == nil {
			return source.Page{}, fmt.Errorf("%s: %w: Shopify said there is a next page but gave no endCursor", s.id, source.ErrUnavailable)
		}
		if len(page.Records) > 0 {
			page.Next = pos.String()
			return page, nil
		}
		// Every customer of the page was read by the previous run: go on.
		if err := ctx.Err(); err != nil {
			return source.Page{}, fmt.Errorf("%s: %w", s.id, err)
		}
	}
}

// passBound is where pos's pass starts: keep reports whether a customer
// updated at a given instant is in the pass, and query is the search that
// asks Shopify for them ("" for every customer). A settled pass keeps the
// customers updated after its floor, another those updated from the
// look-back before it. The search only ever asks "updated_at:>=", and the
// source applies the exact bound itself: Shopify documents the customers
// query's updated_at filter as "The date and time, matching a whole day"
// (shopify.dev, queries/customers), so a comparator may take the value's
// whole day. ">=" then starts at that day's midnight (more customers, the
// ones before the bound dropped here), while ">" would skip the rest of
// the day: every change after the floor on the floor's day, lost
// (TestUpdatedAtFilterMatchesWholeDays).
func (s *Source) passBound(pos position) (keep func(time.Time) bool, query string) {
	if pos.Floor == "" {
		return func(time.Time) bool { return true }, ""
	}
	floor, _ := time.Parse(time.RFC3339, pos.Floor) // parseCursor checked it
	floor = floor.UTC()
	if pos.Settled {
		return func(t time.Time) bool { return t.After(floor) }, "updated_at:>='" + floor.Format(time.RFC3339) + "'"
	}
	from := floor.Add(-s.p.Lookback)
	return func(t time.Time) bool { return !t.Before(from) }, "updated_at:>='" + from.Format(time.RFC3339) + "'"
}

// decode maps one customer's JSON, refusing one larger than
// MaxRecordBytes (measured as Shopify sent it, before decoding).
func (s *Source) decode(raw json.RawMessage) (source.Record, time.Time, error) {
	var c customerJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return source.Record{}, time.Time{}, fmt.Errorf("%s: %w: a customer is not of the shape asked for", s.id, source.ErrInvalid)
	}
	if len(raw) > s.p.MaxRecordBytes {
		id, _ := strings.CutPrefix(c.ID, gidPrefix)
		return source.Record{}, time.Time{}, fmt.Errorf("%s: %w: customer %s is %d bytes, more than max_record_bytes (%d)",
			s.id, source.ErrInvalid, id, len(raw), s.p.MaxRecordBytes)
	}
	rec, updated, err := c.record()
	if err != nil {
		return source.Record{}, time.Time{}, fmt.Errorf("%s: %w", s.id, err)
	}
	return rec, updated, nil
}

// recordHash is what a cursor remembers of a record read at its boundary.
func recordHash(rec source.Record) string {
	b, _ := json.Marshal(rec.Fields) // map keys sorted: canonical
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// gqlResponse is a GraphQL answer. Data holds a pointer to the caller's
// value, so that the answer is decoded in one go.
type gqlResponse struct {
	Data   any `json:"data"`
	Errors []struct {
		Message    string `json:"message"`
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Cost *struct {
			RequestedQueryCost float64 `json:"requestedQueryCost"`
			ThrottleStatus     *struct {
				MaximumAvailable   float64 `json:"maximumAvailable"`
				CurrentlyAvailable float64 `json:"currentlyAvailable"`
				RestoreRate        float64 `json:"restoreRate"`
			} `json:"throttleStatus"`
		} `json:"cost"`
	} `json:"extensions"`
}

// apiError is a failure of the API, its text safe to show.
type apiError struct {
	msg string
	err error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

// query sends one GraphQL document costing about cost points and decodes
// its data into out, waiting for the cost bucket first and after THROTTLED
// answers.
func (s *Source) query(ctx context.Context, doc string, vars map[string]any, cost int, out any) error {
	_, err := s.queryDated(ctx, doc, vars, cost, out)
	return err
}

// queryDated is query, also returning the Date of Shopify's answer (zero
// when it has none): Shopify's clock, the one updatedAt is on.
func (s *Source) queryDated(ctx context.Context, doc string, vars map[string]any, cost int, out any) (time.Time, error) {
	body, err := json.Marshal(map[string]any{"query": doc, "variables": vars})
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w: %w", s.id, source.ErrInvalid, err)
	}
	for throttled := 0; ; throttled++ {
		if err := s.waitFor(ctx, float64(cost)); err != nil {
			return time.Time{}, err
		}
		resp, err := s.api.Do(ctx, apiclient.Request{
			Method: http.MethodPost, URL: s.endpoint, Route: "POST graphql.json",
			Header: http.Header{
				"X-Shopify-Access-Token": {s.p.Token},
				"Content-Type":           {"application/json"},
				"Accept":                 {"application/json"},
			},
			Body: body, Idempotent: true, // a query reads only
		})
		if err != nil {
			return time.Time{}, s.apiFailure(ctx, err)
		}
		if resp.Status != http.StatusOK {
			return time.Time{}, s.statusFailure(resp)
		}
		g := gqlResponse{Data: out}
		err = json.Unmarshal(resp.Body, &g)
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && len(g.Errors) == 0 {
			return time.Time{}, fmt.Errorf("%s: %w: Shopify's data does not have the shape asked for", s.id, source.ErrInvalid)
		}
		if err != nil && !errors.As(err, &typeErr) {
			if len(resp.Body) >= maxBody {
				return time.Time{}, fmt.Errorf("%s: %w: Shopify's answer is larger than %d MiB; lower page_size", s.id, source.ErrInvalid, maxBody>>20)
			}
			return time.Time{}, fmt.Errorf("%s: %w: Shopify's answer is not GraphQL JSON", s.id, source.ErrUnavailable)
		}
		if c := g.Extensions.Cost; c != nil && c.ThrottleStatus != nil {
			ts := c.ThrottleStatus
			s.observe(ts.MaximumAvailable, ts.CurrentlyAvailable, ts.RestoreRate)
			if c.RequestedQueryCost > 0 {
				cost = int(math.Ceil(c.RequestedQueryCost))
			}
		}
		if len(g.Errors) > 0 {
			if g.Errors[0].Extensions.Code == "THROTTLED" {
				if throttled >= maxThrottled {
					return time.Time{}, fmt.Errorf("%s: %w: Shopify kept answering THROTTLED after %d waits", s.id, source.ErrUnavailable, throttled)
				}
				if s.throttleWait(float64(cost)) <= 0 {
					// No throttleStatus to wait by (or it says the bucket
					// is full): a second, as the bucket restores per second.
					if err := s.sleep(ctx, time.Second); err != nil {
						return time.Time{}, err
					}
				}
				continue
			}
			return time.Time{}, s.graphQLFailure(g, resp.Header.Get("X-Shopify-API-Version"))
		}
		date, _ := http.ParseTime(resp.Header.Get("Date"))
		return date, nil
	}
}

// apiFailure maps apiclient's failures (coded for destinations) to the
// source's sentinels, keeping the scrubbed cause.
func (s *Source) apiFailure(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", s.id, cerr)
	}
	var fe *failure.Error
	detail := "Shopify could not be read"
	sentinel := source.ErrUnavailable
	if errors.As(err, &fe) {
		detail = fe.Detail
		if fe.Err != nil {
			detail += ": " + fe.Err.Error()
		}
		if fe.Code == failure.DestinationAuth {
			sentinel = source.ErrAuth
		}
	}
	var re *apiclient.RedirectError
	if errors.As(err, &re) {
		sentinel = source.ErrInvalid
	}
	return fmt.Errorf("%s: %w: %w", s.id, sentinel, &apiError{msg: apiclient.Redact(scrub(detail, s.p.Token)), err: err})
}

func scrub(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "[redacted]")
}

// statusFailure maps an answer apiclient leaves to the caller (a 4xx).
func (s *Source) statusFailure(resp *apiclient.Response) error {
	switch resp.Status {
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w: no Shopify Admin API at shop_url with api_version %s (HTTP 404)", s.id, source.ErrInvalid, s.p.APIVersion)
	case http.StatusPaymentRequired, http.StatusLocked:
		return fmt.Errorf("%s: %w: the shop is frozen or locked (HTTP %d)", s.id, source.ErrUnavailable, resp.Status)
	case http.StatusBadRequest:
		return fmt.Errorf("%s: %w: Shopify refused the request (HTTP 400)", s.id, source.ErrInvalid)
	}
	return fmt.Errorf("%s: %w: Shopify answered HTTP %d", s.id, source.ErrUnavailable, resp.Status)
}

// minAPIVersion is the first version with the fields customerFields reads
// (defaultEmailAddress and defaultPhoneNumber came in 2025-04).
const minAPIVersion = "2025-04"

// graphQLFailure maps a GraphQL error answer: a missing scope is refused
// access; anything else means the query is wrong for this shop or version.
// served is the version Shopify says it used (X-Shopify-API-Version): for
// one it no longer supports, Shopify answers as the oldest it does.
func (s *Source) graphQLFailure(g gqlResponse, served string) error {
	msgs := make([]string, 0, len(g.Errors))
	codes := map[string]bool{}
	for i, e := range g.Errors {
		if i < 3 {
			msgs = append(msgs, e.Message)
		}
		codes[e.Extensions.Code] = true
	}
	msg := apiclient.Redact(scrub(strings.Join(msgs, "; "), s.p.Token))
	switch {
	case codes["ACCESS_DENIED"]:
		return fmt.Errorf("%s: %w: Shopify denied access (the app needs the read_customers scope): %s", s.id, source.ErrAuth, msg)
	case codes["INTERNAL_SERVER_ERROR"]:
		return fmt.Errorf("%s: %w: Shopify failed the query: %s", s.id, source.ErrUnavailable, msg)
	}
	version := s.p.APIVersion
	if !versionRE.MatchString(served) {
		served = "" // not a version: not shown
	}
	if served != "" && served != version {
		version += ", served as " + served + " as Shopify no longer supports " + s.p.APIVersion
	} else {
		served = version
	}
	if served != "unstable" && served < minAPIVersion {
		msg += "; the shopify source needs api_version " + minAPIVersion + " or later"
	}
	return fmt.Errorf("%s: %w: Shopify refused the query (api_version %s): %s", s.id, source.ErrInvalid, version, msg)
}

// throttle is the source's model of Shopify's cost bucket, from the last
// throttleStatus.
type throttle struct {
	known          bool
	max, avail, rt float64
	at             time.Time
}

func (s *Source) observe(maxAvail, avail, rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle = throttle{known: true, max: maxAvail, avail: avail, rt: rate, at: s.p.Clock.Now()}
}

// throttleWait is how long until the bucket holds cost points (0 when it
// does, or when nothing is known yet).
func (s *Source) throttleWait(cost float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.throttle
	if !t.known || t.rt <= 0 {
		return 0
	}
	cost = min(cost, t.max)
	now := t.avail + s.p.Clock.Now().Sub(t.at).Seconds()*t.rt
	if now >= cost {
		return 0
	}
	return time.Duration(math.Ceil((cost - now) / t.rt * float64(time.Second)))
}

func (s *Source) waitFor(ctx context.Context, cost float64) error {
	return s.sleep(ctx, s.throttleWait(cost))
}

func (s *Source) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if err := s.p.Sleep(ctx, d); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%s: %w", s.id, cerr)
		}
		return fmt.Errorf("%s: %w: waiting for Shopify's cost bucket: %w", s.id, source.ErrUnavailable, err)
	}
	return nil
}
