// Package fakeshopify is a fake of Shopify's GraphQL Admin API, as far as
// the `shopify` customers source reads it, written from Shopify's public
// documentation (shopify.dev: the customers query, CustomerConnection,
// CustomerSortKeys, the Node interface's nodes query, customersCount, API
// rate limits, search syntax, pagination). It serves tests and
// `oncesync fake-shopify`.
//
// What it models:
//   - POST /admin/api/{version}/graphql.json with a JSON body {query,
//     variables, operationName}; any YYYY-MM version or "unstable" (the
//     answer's X-Shopify-API-Version names it; its Date is the fake's
//     clock, as Shopify's is its own). A version older than
//     Options.OldestVersion is served as that one ("falls forward", as
//     Shopify does for versions no longer supported); defaultEmailAddress
//     and defaultPhoneNumber exist from 2025-04 on. The X-Shopify-Access-Token
//     header must be present (and equal Options.Token when set): else 401
//     with Shopify's body {"errors":"[API] Invalid API key or access token
//     (unrecognized login or wrong password)"}. Other paths: 404
//     {"errors":"Not Found"}.
//   - customers(first, after, query, sortKey, reverse): a Relay connection
//     with edges{cursor node}, nodes and pageInfo{hasNextPage
//     hasPreviousPage startCursor endCursor}; first is required and capped
//     at 250; sort keys ID (the default), UPDATED_AT and CREATED_AT, ties
//     broken by id; cursors are opaque (base64 of the last id and sort
//     value, as Shopify's are) and tied to the sort key; the connection is
//     evaluated at each request, so a customer updated during a pass moves
//     to the end of an UPDATED_AT order.
//   - the search syntax of `query` for the filters the source uses:
//     updated_at and created_at with :, :>, :>=, :<, :<= and a quoted or
//     bare ISO-8601 time, id with the same comparators, terms joined by
//     spaces or AND. A time matches a whole day by default, as the
//     customers query documents its updated_at filter ("The date and time,
//     matching a whole day, when the customer's information was last
//     updated"): each comparator takes the value's UTC day whole, so
//     "updated_at:>'T'" skips the rest of T's day and "updated_at:>='T'"
//     starts at its midnight (Options.SearchGranularity: time.Second
//     compares to the second, as Shopify keeps updatedAt). An unknown
//     filter is ignored with a warning in extensions.search, as Shopify
//     does; OR, NOT and parentheses are refused.
//   - Customer fields: id (gid://shopify/Customer/N), email, phone (both
//     deprecated in 2025-07 but served), defaultEmailAddress{emailAddress
//     marketingState}, defaultPhoneNumber{phoneNumber}, firstName,
//     lastName, displayName, note, state, tags, verifiedEmail,
//     numberOfOrders, amountSpent{amount currencyCode}, createdAt,
//     updatedAt, legacyResourceId.
//   - nodes(ids: [ID!]!) with `... on Customer { }` (at most 250 ids; an
//     unknown id gives null), customersCount(query, limit){count precision}.
//   - the calculated query cost: an object costs 1, a connection 2 plus
//     first times its node's cost, scalars 0; a query above 1,000 points is
//     refused (MAX_COST_EXCEEDED); a leaky bucket per token (1,000 points,
//     50 restored per second by default) is charged the requested cost and
//     refunded the difference with the actual one; a request the bucket
//     cannot cover gets HTTP 200 with a THROTTLED error; every answer
//     carries extensions.cost{requestedQueryCost actualQueryCost
//     throttleStatus{maximumAvailable currentlyAvailable restoreRate}}.
//   - strict validation, answered as GraphQL errors with Shopify's codes:
//     an unknown field (undefinedField) or argument (argumentNotAccepted),
//     an object without a selection (selectionMismatch), a wrong argument
//     type (argumentLiteralsIncompatible), an undeclared or missing
//     variable, first above 250, neither first nor last.
//   - faults: 5xx answers, 429 with Retry-After, slow answers, connections
//     dropped before the answer or cut halfway through a served (and
//     charged) one, a redirect to another origin; random (by
//     rate) or queued one by one (Server.Inject), settable from Go and flags.
//
// Where it departs from Shopify (deliberately): only forward pagination
// (last/before are refused); the wording of the first > 250 and bad
// cursor messages is the fake's own (Shopify does not document it).
//
// The search index: `query` filters read an index that follows writes, so
// a filtered query does not see a customer until it is indexed: by default
// at once, Options.IndexLag after each update, or later for one customer
// (Server.DelayIndex), so tests can index out of update order.
//
// Test endpoints: GET /_stats (Stats as JSON); POST /_customers with
// {"seed": N} (N generated customers), {"customers": [...]} (upserts: each
// given customer replaces the stored one and is stamped updated now) or
// {"delete": [ids]}; POST /_reset.
package fakeshopify

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// Defaults of the cost throttle (Shopify's documented standard bucket).
const (
	DefaultBucketSize  = 1000
	DefaultRestoreRate = 50
	// MaxPageSize is the largest first a connection takes.
	MaxPageSize = 250
	// MaxQueryCost is the largest requested cost of one query.
	MaxQueryCost = 1000
)

// Options configure the fake. The zero value is a well-behaved shop with
// the default bucket that accepts any non-empty token.
type Options struct {
	// Token, when set, is the only X-Shopify-Access-Token accepted.
	Token string
	// BucketSize and RestoreRate are the cost throttle's bucket (points)
	// and restore rate (points per second); 0 = the defaults.
	BucketSize, RestoreRate int
	// Latency is added to every API request (a slow answer).
	Latency time.Duration
	// ErrorRate is the fraction (0..1) of API requests answered with a 5xx.
	ErrorRate float64
	// RateLimitRate is the fraction of API requests answered 429 with
	// Retry-After (RetryAfter, default 1 s).
	RateLimitRate float64
	RetryAfter    time.Duration
	// DropRate is the fraction of API requests whose connection is cut
	// before any answer.
	DropRate float64
	// CutRate is the fraction of API requests that are served (and
	// charged) but whose answer is cut halfway through its body.
	CutRate float64
	// RedirectTo, when set, answers every API request 301 to this origin.
	RedirectTo string
	// OldestVersion, when set, is the oldest supported stable API version:
	// a request for an older one is served as it (Shopify "falls forward"
	// and names the version served in X-Shopify-API-Version).
	OldestVersion string
	// IndexLag is how long after an update a customer becomes visible to
	// filtered (query:) searches.
	IndexLag time.Duration
	// SearchGranularity is how finely the search's updated_at and
	// created_at filters tell times apart: 0 is a whole day (UTC), as
	// Shopify documents the customers query's updated_at filter ("The date
	// and time, matching a whole day, ..."), so that ":>" a time matches
	// from the next day on; time.Second honours the time given.
	SearchGranularity time.Duration
	// Seed makes fault injection reproducible (0 = random).
	Seed int64
	// Clock tells the time: the bucket's restore, customers' timestamps
	// (nil = the wall clock). Latency always sleeps for real.
	Clock clock.Clock
}

// Fault is one queued answer (Server.Inject): the next API request gets it
// instead of being served.
type Fault struct {
	// Status answers with this HTTP status (a 5xx, or 429 with
	// Retry-After when RetryAfter is set).
	Status     int
	RetryAfter string
	// Drop cuts the connection without an answer.
	Drop bool
	// Cut runs the query (its cost is charged) and cuts the connection
	// halfway through the answer's body.
	Cut bool
	// Throttle answers THROTTLED (HTTP 200) whatever the bucket holds.
	Throttle bool
}

// Customer is a stored customer.
type Customer struct {
	ID             int64     `json:"id"`
	Email          string    `json:"email,omitempty"`
	Phone          string    `json:"phone,omitempty"`
	FirstName      string    `json:"firstName,omitempty"`
	LastName       string    `json:"lastName,omitempty"`
	Note           string    `json:"note,omitempty"`
	State          string    `json:"state,omitempty"` // ENABLED, DISABLED, INVITED, DECLINED
	Tags           []string  `json:"tags,omitempty"`
	VerifiedEmail  bool      `json:"verifiedEmail,omitempty"`
	NumberOfOrders int64     `json:"numberOfOrders,omitempty"`
	AmountSpent    string    `json:"amountSpent,omitempty"` // decimal, USD
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

// GID is the customer's global id.
func (c Customer) GID() string { return "gid://shopify/Customer/" + strconv.FormatInt(c.ID, 10) }

// Stats are the fake's counters (GET /_stats).
type Stats struct {
	Requests     int64            `json:"requests"`  // API requests, whatever their answer
	Customers    int64            `json:"customers"` // stored now
	ByStatus     map[string]int64 `json:"by_status"`
	Throttled    int64            `json:"throttled"`      // THROTTLED answers
	Unauthorized int64            `json:"unauthorized"`   // 401 answers
	GraphQLErrs  int64            `json:"graphql_errors"` // answers with errors (THROTTLED included)
	Dropped      int64            `json:"dropped"`
	CostCharged  int64            `json:"cost_charged"` // actual cost of served queries
	NodesServed  int64            `json:"nodes_served"` // customers returned
	RootFields   map[string]int64 `json:"root_fields"`  // customers, nodes, customersCount
	LastQueries  []string         `json:"last_queries"` // the search queries of the last requests (at most 20)
}

// Server is the fake. It is an http.Handler and safe for concurrent use.
type Server struct {
	clock clock.Clock

	mu        sync.Mutex
	opts      Options
	rng       *rand.Rand
	customers map[int64]*Customer
	sorted    map[string][]*Customer // by sort key; nil when stale
	buckets   map[string]*bucket
	queue     []Fault
	indexedAt map[int64]time.Time // DelayIndex's overrides, until the next update
	stats     Stats
	nextID    int64
}

// New returns a fake configured by o.
func New(o Options) *Server {
	if o.BucketSize <= 0 {
		o.BucketSize = DefaultBucketSize
	}
	if o.RestoreRate <= 0 {
		o.RestoreRate = DefaultRestoreRate
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = time.Second
	}
	c := o.Clock
	if c == nil {
		c = clock.Real{}
	}
	seed := uint64(o.Seed)
	if seed == 0 {
		seed = rand.Uint64()
	}
	s := &Server{clock: c, opts: o, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), nextID: 7_000_000_000_000}
	s.resetLocked()
	return s
}

func (s *Server) resetLocked() {
	s.customers = map[int64]*Customer{}
	s.indexedAt = map[int64]time.Time{}
	s.sorted = nil
	s.buckets = map[string]*bucket{}
	s.queue = nil
	s.stats = Stats{ByStatus: map[string]int64{}, RootFields: map[string]int64{}}
}

// Reset forgets every customer, bucket, queued fault and counter.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

// SetFaults replaces the random fault options (rates, latency, redirect).
func (s *Server) SetFaults(o Options) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Latency, s.opts.ErrorRate, s.opts.RateLimitRate, s.opts.DropRate = o.Latency, o.ErrorRate, o.RateLimitRate, o.DropRate
	s.opts.CutRate = o.CutRate
	s.opts.RedirectTo = o.RedirectTo
	if o.RetryAfter > 0 {
		s.opts.RetryAfter = o.RetryAfter
	}
}

// SetBucket sets the throttle's bucket size and restore rate (0 keeps one)
// and empties every bucket down to available points (negative: full).
func (s *Server) SetBucket(size, restore, available int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if size > 0 {
		s.opts.BucketSize = size
	}
	if restore > 0 {
		s.opts.RestoreRate = restore
	}
	s.buckets = map[string]*bucket{}
	if available >= 0 {
		s.buckets[""] = &bucket{avail: float64(available), at: s.clock.Now()}
	}
}

// Inject queues faults: each of the next API requests gets one, in order.
func (s *Server) Inject(f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, f...)
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Customers = int64(len(s.customers))
	st.ByStatus = copyMap(s.stats.ByStatus)
	st.RootFields = copyMap(s.stats.RootFields)
	st.LastQueries = append([]string(nil), s.stats.LastQueries...)
	return st
}

func copyMap(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *Server) now() time.Time { return s.clock.Now().UTC().Truncate(time.Second) }

// Put stores customers as given (upserts by id). A zero CreatedAt or
// UpdatedAt is stamped now; an id of 0 gets a new one. It returns the
// stored customers.
func (s *Server) Put(cs ...Customer) []Customer {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]Customer, len(cs))
	for i, c := range cs {
		if c.ID == 0 {
			s.nextID++
			c.ID = s.nextID
		}
		if c.CreatedAt.IsZero() {
			if old, ok := s.customers[c.ID]; ok {
				c.CreatedAt = old.CreatedAt
			} else {
				c.CreatedAt = now
			}
		}
		if c.UpdatedAt.IsZero() {
			c.UpdatedAt = now
		}
		c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC().Truncate(time.Second), c.UpdatedAt.UTC().Truncate(time.Second)
		if c.State == "" {
			c.State = "ENABLED"
		}
		cc := c
		s.customers[c.ID] = &cc
		delete(s.indexedAt, c.ID)
		out[i] = cc
	}
	s.sorted = nil
	return out
}

// Update changes a stored customer with fn and stamps it updated now, as
// any change through Shopify does. It reports whether the customer exists.
func (s *Server) Update(id int64, fn func(c *Customer)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.customers[id]
	if !ok {
		return false
	}
	fn(c)
	c.ID = id
	c.UpdatedAt = s.now()
	delete(s.indexedAt, id)
	s.sorted = nil
	return true
}

// searchGranularity is Options.SearchGranularity, a day when unset.
func (s *Server) searchGranularity() time.Duration {
	if s.opts.SearchGranularity <= 0 {
		return 24 * time.Hour
	}
	return s.opts.SearchGranularity
}

// DelayIndex makes customer id invisible to filtered searches until at
// (until its next change), as a search index that fell behind.
func (s *Server) DelayIndex(id int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.indexedAt[id] = at
}

// indexed reports whether filtered searches see c now.
func (s *Server) indexed(c *Customer, now time.Time) bool {
	if at, ok := s.indexedAt[c.ID]; ok {
		return !now.Before(at)
	}
	return !now.Before(c.UpdatedAt.Add(s.opts.IndexLag))
}

// Delete removes customers.
func (s *Server) Delete(ids ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.customers, id)
	}
	s.sorted = nil
}

// Customer returns a stored customer.
func (s *Server) Customer(id int64) (Customer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.customers[id]
	if !ok {
		return Customer{}, false
	}
	return *c, true
}

// Seed adds n generated customers (ids after the highest so far, e-mails
// customerN@example.com) and returns them.
func (s *Server) Seed(n int) []Customer {
	cs := make([]Customer, n)
	s.mu.Lock()
	base := s.nextID
	s.nextID += int64(n)
	s.mu.Unlock()
	for i := range cs {
		id := base + int64(i) + 1
		cs[i] = Customer{
			ID: id, Email: fmt.Sprintf("customer%d@example.com", id), FirstName: "First" + strconv.Itoa(i+1),
			LastName: "Last", Phone: fmt.Sprintf("+1555%07d", (i+1)%10_000_000), Tags: []string{"seeded"},
			VerifiedEmail: true, NumberOfOrders: int64(i % 7), AmountSpent: fmt.Sprintf("%d.00", i%300),
		}
	}
	return s.Put(cs...)
}

// order returns the customers sorted by key (ties by id), cached until the
// next change.
func (s *Server) order(key string) []*Customer {
	if s.sorted == nil {
		s.sorted = map[string][]*Customer{}
	}
	if got, ok := s.sorted[key]; ok {
		return got
	}
	out := make([]*Customer, 0, len(s.customers))
	for _, c := range s.customers {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return less(key, out[i], out[j]) })
	s.sorted[key] = out
	return out
}

func sortValue(key string, c *Customer) time.Time {
	switch key {
	case "UPDATED_AT":
		return c.UpdatedAt
	case "CREATED_AT":
		return c.CreatedAt
	}
	return time.Time{}
}

func less(key string, a, b *Customer) bool {
	if key != "ID" {
		va, vb := sortValue(key, a), sortValue(key, b)
		if !va.Equal(vb) {
			return va.Before(vb)
		}
	}
	return a.ID < b.ID
}

// bucket is one token's leaky bucket of query cost points.
type bucket struct {
	avail float64
	at    time.Time
}

func (s *Server) bucketFor(token string) *bucket {
	// One shop, one app: every token shares the shop's bucket (Shopify's
	// bucket is per app and store).
	b, ok := s.buckets[""]
	if !ok {
		b = &bucket{avail: float64(s.opts.BucketSize), at: s.clock.Now()}
		s.buckets[""] = b
	}
	now := s.clock.Now()
	if el := now.Sub(b.at); el > 0 {
		b.avail = min(float64(s.opts.BucketSize), b.avail+el.Seconds()*float64(s.opts.RestoreRate))
	}
	b.at = now
	_ = token
	return b
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_stats" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.Stats())
	case r.URL.Path == "/_customers" && r.Method == http.MethodPost:
		s.serveCustomers(w, r)
	case r.URL.Path == "/_reset" && r.Method == http.MethodPost:
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(r.URL.Path, "/admin/api/"):
		s.serveAPI(w, r)
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"errors": "Not Found"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// controlBody is POST /_customers.
type controlBody struct {
	Seed      int        `json:"seed"`
	Customers []Customer `json:"customers"`
	Delete    []int64    `json:"delete"`
}

func (s *Server) serveCustomers(w http.ResponseWriter, r *http.Request) {
	var b controlBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if b.Seed < 0 || b.Seed > 10_000_000 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "seed must be 0..10000000"})
		return
	}
	if b.Seed > 0 {
		s.Seed(b.Seed)
	}
	for i := range b.Customers {
		// A change through Shopify stamps the customer updated now.
		b.Customers[i].UpdatedAt = time.Time{}
	}
	if len(b.Customers) > 0 {
		s.Put(b.Customers...)
	}
	if len(b.Delete) > 0 {
		s.Delete(b.Delete...)
	}
	writeJSON(w, http.StatusOK, map[string]int64{"customers": s.Stats().Customers})
}
