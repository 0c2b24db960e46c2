package fakeshopify

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// argType is an argument's GraphQL type, as the fake checks it.
type argType string

const (
	tyInt     argType = "Int"
	tyString  argType = "String"
	tyBool    argType = "Boolean"
	tySortKey argType = "CustomerSortKeys"
	tyIDs     argType = "[ID!]!"
)

var rootArgs = map[string]map[string]argType{
	"customers":      {"first": tyInt, "after": tyString, "last": tyInt, "before": tyString, "query": tyString, "reverse": tyBool, "sortKey": tySortKey},
	"nodes":          {"ids": tyIDs},
	"customersCount": {"query": tyString, "limit": tyInt},
}

// Customer's fields: scalars, and objects with their scalar fields.
var (
	customerScalars = map[string]bool{
		"id": true, "legacyResourceId": true, "email": true, "phone": true, "firstName": true, "lastName": true,
		"displayName": true, "note": true, "state": true, "tags": true, "verifiedEmail": true, "numberOfOrders": true,
		"createdAt": true, "updatedAt": true, "__typename": true,
	}
	customerObjects = map[string]map[string]bool{
		"defaultEmailAddress": {"emailAddress": true, "marketingState": true, "__typename": true},
		"defaultPhoneNumber":  {"phoneNumber": true, "marketingState": true, "__typename": true},
		"amountSpent":         {"amount": true, "currencyCode": true, "__typename": true},
	}
	// customerSince: fields added by a version (shopify.dev changelog,
	// "Adding defaultEmailAddress field to Customer", 2025-04).
	customerSince = map[string]string{"defaultEmailAddress": "2025-04", "defaultPhoneNumber": "2025-04"}
	objectTypes   = map[string]string{"defaultEmailAddress": "CustomerEmailAddress", "defaultPhoneNumber": "CustomerPhoneNumber", "amountSpent": "MoneyV2"}
)

type rootPlan struct {
	f        field
	args     map[string]any
	cost     int
	nodeCost int
	ok       bool
}

func (ex *execution) errf(f field, code, format string, args ...any) {
	ex.errs = append(ex.errs, errAt(f.Line, f.Col, code, format, args...))
}

// planRoot validates a root field and prices it.
func (ex *execution) planRoot(f field) rootPlan {
	rp := rootPlan{f: f}
	if f.On != "" {
		ex.errf(f, "UNSUPPORTED_BY_FAKE", "this fake Shopify does not support fragments on QueryRoot")
		return rp
	}
	if f.Name == "__typename" {
		rp.ok = true
		return rp
	}
	spec, ok := rootArgs[f.Name]
	if !ok {
		ex.errf(f, "undefinedField", "Field '%s' doesn't exist on type 'QueryRoot'", f.Name)
		return rp
	}
	rp.args = ex.args(f, spec)
	switch f.Name {
	case "customers":
		if !f.HasSel {
			ex.errf(f, "selectionMismatch", "Field must have selections (field 'customers' returns CustomerConnection but has no selections. Did you mean 'customers { ... }'?)")
			return rp
		}
		rp.nodeCost = ex.checkConnection(f.Sel)
		first, hasFirst := rp.args["first"]
		_, hasLast := rp.args["last"]
		_, hasBefore := rp.args["before"]
		switch {
		case hasLast || hasBefore:
			ex.errf(f, "UNSUPPORTED_BY_FAKE", "this fake Shopify supports forward pagination only (first/after)")
		case !hasFirst || first == nil:
			ex.errf(f, "BAD_REQUEST", "you must provide one of first or last")
		default:
			n, _ := first.(json.Number).Int64()
			switch {
			case n > MaxPageSize:
				ex.errf(f, "BAD_REQUEST", "The first argument of customers must be at most %d, got %d.", MaxPageSize, n)
			case n < 0:
				ex.errf(f, "BAD_REQUEST", "The first argument of customers must not be negative.")
			}
			rp.cost = 2 + int(n)*rp.nodeCost
		}
		if sk, ok := rp.args["sortKey"]; ok && sk != nil && !validSortKeys[fmt.Sprint(sk)] {
			ex.errf(f, "argumentLiteralsIncompatible", "Argument 'sortKey' on Field 'customers' has an invalid value (%v). Expected type 'CustomerSortKeys'.", sk)
		}
	case "nodes":
		if !f.HasSel {
			ex.errf(f, "selectionMismatch", "Field must have selections (field 'nodes' returns Node but has no selections. Did you mean 'nodes { ... }'?)")
			return rp
		}
		rp.nodeCost = ex.checkNode(f.Sel)
		ids, ok := rp.args["ids"].([]any)
		if !ok {
			ex.errf(f, "missingRequiredArguments", "Field 'nodes' is missing required arguments: ids")
			return rp
		}
		if len(ids) > MaxPageSize {
			ex.errf(f, "MAX_INPUT_SIZE_EXCEEDED", "The input array size of %d is greater than the maximum allowed of %d.", len(ids), MaxPageSize)
		}
		rp.cost = len(ids) * rp.nodeCost
	case "customersCount":
		if !f.HasSel {
			ex.errf(f, "selectionMismatch", "Field must have selections (field 'customersCount' returns Count but has no selections. Did you mean 'customersCount { ... }'?)")
			return rp
		}
		for _, s := range f.Sel {
			if s.On != "" || (s.Name != "count" && s.Name != "precision" && s.Name != "__typename") {
				ex.errf(s, "undefinedField", "Field '%s' doesn't exist on type 'Count'", s.Name)
			} else if s.HasSel {
				ex.errf(s, "selectionMismatch", "Selections can't be made on scalars (field '%s' returns Int but has selections)", s.Name)
			}
		}
		rp.cost = 1
	}
	rp.ok = true
	return rp
}

// args resolves and type-checks a field's arguments.
func (ex *execution) args(f field, spec map[string]argType) map[string]any {
	out := map[string]any{}
	for _, a := range f.Args {
		typ, ok := spec[a.Name]
		if !ok {
			ex.errs = append(ex.errs, gqlError{Message: fmt.Sprintf("Field '%s' doesn't accept argument '%s'", f.Name, a.Name),
				Locations: []location{{a.Line, a.Col}}, Path: []any{"query", f.key(), a.Name},
				Extensions: map[string]any{"code": "argumentNotAccepted", "name": f.Name, "typeName": "Field", "argumentName": a.Name}})
			continue
		}
		if _, dup := out[a.Name]; dup {
			ex.errs = append(ex.errs, errAt(a.Line, a.Col, "argumentUniqueness", "There can be only one argument named \"%s\"", a.Name))
			continue
		}
		v, ok := ex.literal(a.Value)
		if !ok {
			ex.errs = append(ex.errs, errAt(a.Line, a.Col, "variableNotDefined", "Variable $%s is used by anonymous query but not declared", a.Value.Var))
			continue
		}
		if !argFits(typ, v, a.Value.Var != "") {
			ex.errs = append(ex.errs, gqlError{Message: fmt.Sprintf("Argument '%s' on Field '%s' has an invalid value (%s). Expected type '%s'.", a.Name, f.Name, show(v), typ),
				Locations: []location{{a.Line, a.Col}}, Path: []any{"query", f.key(), a.Name},
				Extensions: map[string]any{"code": "argumentLiteralsIncompatible", "typeName": "Field", "argumentName": a.Name}})
			continue
		}
		out[a.Name] = v
	}
	return out
}

func show(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

func argFits(typ argType, v any, fromVar bool) bool {
	if v == nil {
		return typ != tyIDs
	}
	switch typ {
	case tyInt:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case tyString:
		_, ok := v.(string)
		return ok
	case tyBool:
		_, ok := v.(bool)
		return ok
	case tySortKey:
		if e, ok := v.(enumValue); ok {
			return validSortKeys[string(e)]
		}
		s, ok := v.(string)
		return ok && fromVar && validSortKeys[s]
	case tyIDs:
		list, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range list {
			if _, ok := e.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// checkConnection validates a CustomerConnection selection and returns
// its node's cost.
func (ex *execution) checkConnection(sel []field) int {
	cost := 1
	for _, f := range sel {
		switch {
		case f.On != "":
			ex.errf(f, "UNSUPPORTED_BY_FAKE", "this fake Shopify does not support fragments on CustomerConnection")
		case f.Name == "__typename":
		case f.Name == "nodes":
			cost = max(cost, ex.checkCustomer(f, "nodes"))
		case f.Name == "edges":
			if !f.HasSel {
				ex.errf(f, "selectionMismatch", "Field must have selections (field 'edges' returns CustomerEdge but has no selections. Did you mean 'edges { ... }'?)")
				continue
			}
			for _, e := range f.Sel {
				switch {
				case e.On == "" && e.Name == "cursor":
				case e.On == "" && e.Name == "__typename":
				case e.On == "" && e.Name == "node":
					cost = max(cost, ex.checkCustomer(e, "node"))
				default:
					ex.errf(e, "undefinedField", "Field '%s' doesn't exist on type 'CustomerEdge'", e.Name)
				}
			}
		case f.Name == "pageInfo":
			if !f.HasSel {
				ex.errf(f, "selectionMismatch", "Field must have selections (field 'pageInfo' returns PageInfo but has no selections. Did you mean 'pageInfo { ... }'?)")
				continue
			}
			for _, p := range f.Sel {
				switch p.Name {
				case "hasNextPage", "hasPreviousPage", "startCursor", "endCursor", "__typename":
				default:
					ex.errf(p, "undefinedField", "Field '%s' doesn't exist on type 'PageInfo'", p.Name)
				}
			}
		default:
			ex.errf(f, "undefinedField", "Field '%s' doesn't exist on type 'CustomerConnection'", f.Name)
		}
	}
	return cost
}

// checkCustomer validates a Customer selection (f's) and returns its cost.
func (ex *execution) checkCustomer(f field, name string) int {
	if !f.HasSel {
		ex.errf(f, "selectionMismatch", "Field must have selections (field '%s' returns Customer but has no selections. Did you mean '%s { ... }'?)", name, name)
		return 1
	}
	return 1 + ex.checkCustomerSel(f.Sel)
}

func (ex *execution) checkCustomerSel(sel []field) int {
	objects := 0
	for _, f := range sel {
		if f.On != "" {
			if f.On != "Customer" {
				ex.errf(f, "fragmentSpreadImpossible", "Fragment on %s can't be spread inside Customer", f.On)
				continue
			}
			objects += ex.checkCustomerSel(f.Sel)
			continue
		}
		if customerScalars[f.Name] {
			if f.HasSel {
				ex.errf(f, "selectionMismatch", "Selections can't be made on scalars (field '%s' returns a scalar but has selections)", f.Name)
			}
			if len(f.Args) > 0 {
				ex.errf(f, "argumentNotAccepted", "Field '%s' doesn't accept argument '%s'", f.Name, f.Args[0].Name)
			}
			continue
		}
		sub, ok := customerObjects[f.Name]
		if since := customerSince[f.Name]; ok && ex.version < since {
			ok = false
		}
		if !ok {
			ex.errf(f, "undefinedField", "Field '%s' doesn't exist on type 'Customer'", f.Name)
			continue
		}
		if !f.HasSel {
			ex.errf(f, "selectionMismatch", "Field must have selections (field '%s' returns %s but has no selections. Did you mean '%s { ... }'?)", f.Name, objectTypes[f.Name], f.Name)
			continue
		}
		for _, s := range f.Sel {
			if s.On != "" || !sub[s.Name] {
				ex.errf(s, "undefinedField", "Field '%s' doesn't exist on type '%s'", s.Name, objectTypes[f.Name])
			}
		}
		objects++
	}
	return objects
}

// checkNode validates a Node selection (id, __typename, ... on Customer).
func (ex *execution) checkNode(sel []field) int {
	cost := 1
	for _, f := range sel {
		switch {
		case f.On == "Customer":
			cost = max(cost, 1+ex.checkCustomerSel(f.Sel))
		case f.On != "":
			ex.errf(f, "undefinedType", "this fake Shopify knows no type %s on Node (only Customer)", f.On)
		case f.Name == "id" || f.Name == "__typename":
		default:
			ex.errf(f, "undefinedField", "Field '%s' doesn't exist on type 'Node'", f.Name)
		}
	}
	return cost
}

// run executes a validated root field (s.mu held) and returns its value
// and actual cost.
func (ex *execution) run(rp rootPlan) (any, int) {
	switch rp.f.Name {
	case "__typename":
		return "QueryRoot", 0
	case "customers":
		return ex.runCustomers(rp)
	case "nodes":
		return ex.runNodes(rp)
	case "customersCount":
		return ex.runCount(rp), 1
	}
	return nil, 0
}

// filter is a parsed search query.
type filter struct {
	terms []term
}

type term struct {
	field, op string
	t         time.Time
	id        int64
}

// match reports whether c matches every term. A time term matches by
// the search's granularity g (Options.SearchGranularity; a whole day by
// default), as Shopify documents the customers query's updated_at filter:
// "The date and time, matching a whole day, when the customer's
// information was last updated"
// (https://shopify.dev/docs/api/admin-graphql/latest/queries/customers).
// The value names the span [lo, lo+g) it falls in, and each comparator
// takes the span whole, as a search engine rounds a date in a range
// (Elasticsearch's range query: gt rounds up to the span's last instant,
// gte down to its first): "updated_at:>'2026-12-01T08:00:00Z'" matches
// from 2026-12-02 on, "updated_at:>='2026-12-01T08:00:00Z'" from
// 2026-12-01T00:00:00Z. With a granularity of a second, every comparison
// is exact.
func (f filter) match(c *Customer, g time.Duration) bool {
	for _, t := range f.terms {
		var cmp int
		switch t.field {
		case "updated_at", "created_at":
			v := c.UpdatedAt
			if t.field == "created_at" {
				v = c.CreatedAt
			}
			lo := t.t.Truncate(g)
			hi := lo.Add(g)
			switch {
			case v.Before(lo):
				cmp = -1
			case !v.Before(hi):
				cmp = 1
			}
		case "id":
			switch {
			case c.ID < t.id:
				cmp = -1
			case c.ID > t.id:
				cmp = 1
			}
		}
		ok := false
		switch t.op {
		case "":
			ok = cmp == 0
		case ">":
			ok = cmp > 0
		case ">=":
			ok = cmp >= 0
		case "<":
			ok = cmp < 0
		case "<=":
			ok = cmp <= 0
		}
		if !ok {
			return false
		}
	}
	return true
}

var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"}

// parseSearch reads the search syntax the fake models; unknown fields are
// warnings, unsupported syntax is an error.
func (ex *execution) parseSearch(f field, q string) (filter, bool) {
	var out filter
	for _, tok := range splitSearch(q) {
		switch {
		case tok == "AND":
			continue
		case tok == "OR" || tok == "NOT" || strings.ContainsAny(tok[:1], "(-") || strings.HasSuffix(tok, ")"):
			ex.errf(f, "UNSUPPORTED_BY_FAKE", "this fake Shopify's search supports terms joined by AND only, got %q", tok)
			return out, false
		}
		name, rest, ok := strings.Cut(tok, ":")
		if !ok {
			ex.warnings = append(ex.warnings, obj{{"path", []string{f.key()}}, {"query", q}, {"warnings", []obj{{{"field", "default"}, {"message", "Free-text search is not modelled by this fake; the term was ignored."}, {"code", "invalid_field"}}}}})
			continue
		}
		op := ""
		for _, o := range []string{">=", "<=", ">", "<"} {
			if strings.HasPrefix(rest, o) {
				op, rest = o, rest[len(o):]
				break
			}
		}
		val := strings.Trim(rest, `'"`)
		t := term{field: name, op: op}
		switch name {
		case "updated_at", "created_at":
			parsed := false
			for _, l := range timeLayouts {
				if tm, err := time.Parse(l, val); err == nil {
					t.t, parsed = tm.UTC().Truncate(time.Second), true
					break
				}
			}
			if !parsed {
				ex.warnings = append(ex.warnings, obj{{"path", []string{f.key()}}, {"query", q}, {"warnings", []obj{{{"field", name}, {"message", "Invalid value."}, {"code", "invalid_value"}}}}})
				continue
			}
		case "id":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				ex.warnings = append(ex.warnings, obj{{"path", []string{f.key()}}, {"query", q}, {"warnings", []obj{{{"field", name}, {"message", "Invalid value."}, {"code", "invalid_value"}}}}})
				continue
			}
			t.id = n
		default:
			ex.warnings = append(ex.warnings, obj{{"path", []string{f.key()}}, {"query", q}, {"warnings", []obj{{{"field", name}, {"message", "Invalid search field for this query."}, {"code", "invalid_field"}}}}})
			continue
		}
		out.terms = append(out.terms, t)
	}
	return out, true
}

// splitSearch splits at spaces outside quotes.
func splitSearch(q string) []string {
	var (
		out   []string
		cur   strings.Builder
		quote rune
	)
	for _, r := range q {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote = r
			cur.WriteRune(r)
		case r == ' ' || r == '\t' || r == '\n':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// cursorData is what a cursor encodes (as Shopify's do).
type cursorData struct {
	LastID    int64  `json:"last_id"`
	LastValue string `json:"last_value"`
}

func encodeCursor(key string, c *Customer) string {
	v := strconv.FormatInt(c.ID, 10)
	if key != "ID" {
		v = sortValue(key, c).Format(time.RFC3339)
	}
	b, _ := json.Marshal(cursorData{LastID: c.ID, LastValue: v})
	return base64.StdEncoding.EncodeToString(b)
}

func decodeCursor(key, s string) (Customer, bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return Customer{}, false
	}
	var d cursorData
	if err := json.Unmarshal(b, &d); err != nil || d.LastID <= 0 {
		return Customer{}, false
	}
	c := Customer{ID: d.LastID}
	switch key {
	case "ID":
		if d.LastValue != strconv.FormatInt(d.LastID, 10) {
			return c, false
		}
	default:
		t, err := time.Parse(time.RFC3339, d.LastValue)
		if err != nil {
			return c, false
		}
		c.UpdatedAt, c.CreatedAt = t, t
	}
	return c, true
}

func (ex *execution) runCustomers(rp rootPlan) (any, int) {
	s := ex.s
	key := "ID"
	if sk, ok := rp.args["sortKey"]; ok && sk != nil {
		key = fmt.Sprint(sk)
	}
	switch key {
	case "LOCATION", "NAME", "RELEVANCE":
		ex.errf(rp.f, "UNSUPPORTED_BY_FAKE", "this fake Shopify sorts customers by ID, UPDATED_AT or CREATED_AT only")
		return nil, 0
	}
	reverse, _ := rp.args["reverse"].(bool)
	first, _ := rp.args["first"].(json.Number).Int64()
	var flt filter
	q, filtered := rp.args["query"].(string)
	if filtered {
		s.stats.LastQueries = append(s.stats.LastQueries, q)
		if n := len(s.stats.LastQueries); n > 20 {
			s.stats.LastQueries = s.stats.LastQueries[n-20:]
		}
		var ok bool
		if flt, ok = ex.parseSearch(rp.f, q); !ok {
			return nil, 0
		}
	}
	all := s.order(key)
	idx := func(i int) *Customer {
		if reverse {
			return all[len(all)-1-i]
		}
		return all[i]
	}
	start := 0
	if after, ok := rp.args["after"].(string); ok {
		pos, valid := decodeCursor(key, after)
		if !valid {
			ex.errf(rp.f, "BAD_REQUEST", "Invalid cursor for the current pagination sort (%s).", key)
			return nil, 0
		}
		start = sort.Search(len(all), func(i int) bool {
			if reverse {
				return less(key, idx(i), &pos)
			}
			return less(key, &pos, idx(i))
		})
	}
	var page []*Customer
	more := false
	now := s.clock.Now()
	for i := start; i < len(all); i++ {
		c := idx(i)
		if !flt.match(c, s.searchGranularity()) || (filtered && !s.indexed(c, now)) {
			continue
		}
		if int64(len(page)) == first {
			more = true
			break
		}
		page = append(page, c)
	}
	s.stats.RootFields["customers"]++
	s.stats.NodesServed += int64(len(page))
	_, hasAfter := rp.args["after"].(string)
	conn := obj{}
	for _, f := range rp.f.Sel {
		switch f.Name {
		case "__typename":
			conn = append(conn, kv{f.key(), "CustomerConnection"})
		case "nodes":
			list := make([]any, len(page))
			for i, c := range page {
				list[i] = customerObj(f.Sel, c)
			}
			conn = append(conn, kv{f.key(), list})
		case "edges":
			list := make([]any, len(page))
			for i, c := range page {
				e := obj{}
				for _, ef := range f.Sel {
					switch ef.Name {
					case "cursor":
						e = append(e, kv{ef.key(), encodeCursor(key, c)})
					case "node":
						e = append(e, kv{ef.key(), customerObj(ef.Sel, c)})
					case "__typename":
						e = append(e, kv{ef.key(), "CustomerEdge"})
					}
				}
				list[i] = e
			}
			conn = append(conn, kv{f.key(), list})
		case "pageInfo":
			pi := obj{}
			for _, pf := range f.Sel {
				var v any
				switch pf.Name {
				case "hasNextPage":
					v = more
				case "hasPreviousPage":
					v = hasAfter
				case "startCursor":
					if len(page) > 0 {
						v = encodeCursor(key, page[0])
					}
				case "endCursor":
					if len(page) > 0 {
						v = encodeCursor(key, page[len(page)-1])
					}
				case "__typename":
					v = "PageInfo"
				}
				pi = append(pi, kv{pf.key(), v})
			}
			conn = append(conn, kv{f.key(), pi})
		}
	}
	return conn, 2 + len(page)*rp.nodeCost
}

func (ex *execution) runNodes(rp rootPlan) (any, int) {
	s := ex.s
	ids := rp.args["ids"].([]any)
	out := make([]any, len(ids))
	for i, raw := range ids {
		gid := raw.(string)
		rest, ok := strings.CutPrefix(gid, "gid://shopify/")
		typ, num, ok2 := strings.Cut(rest, "/")
		n, err := strconv.ParseInt(num, 10, 64)
		if !ok || !ok2 || typ == "" || err != nil || n <= 0 {
			ex.errf(rp.f, "argumentLiteralsIncompatible", "Invalid global id '%s'", gid)
			return nil, 0
		}
		c, found := s.customers[n]
		if typ != "Customer" || !found {
			continue // null
		}
		o := obj{}
		for _, f := range rp.f.Sel {
			switch {
			case f.On == "Customer":
				o = append(o, customerObj(f.Sel, c)...)
			case f.Name == "id":
				o = append(o, kv{f.key(), c.GID()})
			case f.Name == "__typename":
				o = append(o, kv{f.key(), "Customer"})
			}
		}
		out[i] = o
		s.stats.NodesServed++
	}
	s.stats.RootFields["nodes"]++
	return out, len(ids) * rp.nodeCost
}

func (ex *execution) runCount(rp rootPlan) any {
	s := ex.s
	var flt filter
	if q, ok := rp.args["query"].(string); ok {
		var ok bool
		if flt, ok = ex.parseSearch(rp.f, q); !ok {
			return nil
		}
	}
	limit := int64(10000)
	if l, ok := rp.args["limit"]; ok {
		if l == nil {
			limit = -1
		} else {
			limit, _ = l.(json.Number).Int64()
		}
	}
	n := int64(0)
	for _, c := range s.customers {
		if flt.match(c, s.searchGranularity()) {
			n++
		}
	}
	precision := "EXACT"
	if limit >= 0 && n > limit {
		n, precision = limit, "AT_LEAST"
	}
	s.stats.RootFields["customersCount"]++
	o := obj{}
	for _, f := range rp.f.Sel {
		switch f.Name {
		case "count":
			o = append(o, kv{f.key(), n})
		case "precision":
			o = append(o, kv{f.key(), precision})
		case "__typename":
			o = append(o, kv{f.key(), "Count"})
		}
	}
	return o
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// customerObj renders a customer for a validated selection.
func customerObj(sel []field, c *Customer) obj {
	o := make(obj, 0, len(sel))
	for _, f := range sel {
		if f.On != "" {
			o = append(o, customerObj(f.Sel, c)...)
			continue
		}
		var v any
		switch f.Name {
		case "__typename":
			v = "Customer"
		case "id":
			v = c.GID()
		case "legacyResourceId":
			v = strconv.FormatInt(c.ID, 10)
		case "email":
			v = nilIfEmpty(c.Email)
		case "phone":
			v = nilIfEmpty(c.Phone)
		case "firstName":
			v = nilIfEmpty(c.FirstName)
		case "lastName":
			v = nilIfEmpty(c.LastName)
		case "displayName":
			v = strings.TrimSpace(c.FirstName + " " + c.LastName)
			if v == "" {
				v = c.Email
			}
		case "note":
			v = nilIfEmpty(c.Note)
		case "state":
			v = c.State
		case "tags":
			tags := c.Tags
			if tags == nil {
				tags = []string{}
			}
			v = tags
		case "verifiedEmail":
			v = c.VerifiedEmail
		case "numberOfOrders":
			v = strconv.FormatInt(c.NumberOfOrders, 10) // UnsignedInt64 is a string
		case "createdAt":
			v = c.CreatedAt.UTC().Format(time.RFC3339)
		case "updatedAt":
			v = c.UpdatedAt.UTC().Format(time.RFC3339)
		case "defaultEmailAddress":
			if c.Email != "" {
				v = subObj(f.Sel, map[string]any{"emailAddress": c.Email, "marketingState": "NOT_SUBSCRIBED", "__typename": "CustomerEmailAddress"})
			}
		case "defaultPhoneNumber":
			if c.Phone != "" {
				v = subObj(f.Sel, map[string]any{"phoneNumber": c.Phone, "marketingState": "NOT_SUBSCRIBED", "__typename": "CustomerPhoneNumber"})
			}
		case "amountSpent":
			amount := c.AmountSpent
			if amount == "" {
				amount = "0.0"
			}
			v = subObj(f.Sel, map[string]any{"amount": amount, "currencyCode": "USD", "__typename": "MoneyV2"})
		}
		o = append(o, kv{f.key(), v})
	}
	return o
}

func subObj(sel []field, vals map[string]any) obj {
	o := make(obj, 0, len(sel))
	for _, f := range sel {
		o = append(o, kv{f.key(), vals[f.Name]})
	}
	return o
}
