package fakeshopify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var apiPathRE = regexp.MustCompile(`^/admin/api/(\d{4}-\d{2}|unstable)/graphql\.json$`)

const (
	invalidToken = "[API] Invalid API key or access token (unrecognized login or wrong password)"
	docsRates    = "https://shopify.dev/api/usage/rate-limits"
)

// gqlError is one entry of a GraphQL answer's errors.
type gqlError struct {
	Message    string         `json:"message"`
	Locations  []location     `json:"locations,omitempty"`
	Path       []any          `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

type location struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

func errAt(line, col int, code, format string, args ...any) gqlError {
	e := gqlError{Message: fmt.Sprintf(format, args...), Extensions: map[string]any{"code": code}}
	if line > 0 {
		e.Locations = []location{{line, col}}
	}
	return e
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	// Date is the shop's clock, the one updatedAt is on (net/http would
	// write the wall clock's).
	w.Header().Set("Date", s.clock.Now().UTC().Format(http.TimeFormat))
	m := apiPathRE.FindStringSubmatch(r.URL.Path)
	if m == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"errors": "Not Found"})
		return
	}
	s.mu.Lock()
	s.stats.Requests++
	opts := s.opts
	var fault *Fault
	if len(s.queue) > 0 {
		f := s.queue[0]
		s.queue = s.queue[1:]
		fault = &f
	} else {
		switch x := s.rng.Float64(); {
		case opts.DropRate > 0 && x < opts.DropRate:
			fault = &Fault{Drop: true}
		case opts.ErrorRate > 0 && x < opts.DropRate+opts.ErrorRate:
			fault = &Fault{Status: []int{500, 502, 503, 504}[s.rng.IntN(4)]}
		case opts.RateLimitRate > 0 && x < opts.DropRate+opts.ErrorRate+opts.RateLimitRate:
			fault = &Fault{Status: http.StatusTooManyRequests, RetryAfter: strconv.FormatFloat(opts.RetryAfter.Seconds(), 'f', 1, 64)}
		case opts.CutRate > 0 && x < opts.DropRate+opts.ErrorRate+opts.RateLimitRate+opts.CutRate:
			fault = &Fault{Cut: true}
		}
	}
	s.mu.Unlock()
	if opts.Latency > 0 {
		select {
		case <-time.After(opts.Latency):
		case <-r.Context().Done():
			return
		}
	}
	if opts.RedirectTo != "" {
		w.Header().Set("Location", strings.TrimRight(opts.RedirectTo, "/")+r.URL.Path)
		s.count(http.StatusMovedPermanently)
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	if fault != nil && !fault.Throttle && !fault.Cut {
		switch {
		case fault.Drop:
			s.mu.Lock()
			s.stats.Dropped++
			s.mu.Unlock()
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		case fault.Status == http.StatusTooManyRequests:
			if fault.RetryAfter != "" {
				w.Header().Set("Retry-After", fault.RetryAfter)
			}
			s.count(fault.Status)
			writeJSON(w, fault.Status, map[string]string{"errors": "Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."})
			return
		default:
			s.count(fault.Status)
			writeJSON(w, fault.Status, map[string]string{"errors": http.StatusText(fault.Status)})
			return
		}
	}
	// A version no longer supported is served as the oldest supported one
	// ("falls forward"), and the answer's header names the version served.
	served := m[1]
	if opts.OldestVersion != "" && served != "unstable" && served < opts.OldestVersion {
		served = opts.OldestVersion
	}
	w.Header().Set("X-Shopify-API-Version", served)
	token := r.Header.Get("X-Shopify-Access-Token")
	if token == "" || (opts.Token != "" && token != opts.Token) {
		s.mu.Lock()
		s.stats.Unauthorized++
		s.mu.Unlock()
		s.count(http.StatusUnauthorized)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"errors": invalidToken})
		return
	}
	if r.Method != http.MethodPost {
		s.count(http.StatusMethodNotAllowed)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"errors": "this fake Shopify takes POST only"})
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.count(http.StatusBadRequest)
		writeJSON(w, http.StatusBadRequest, map[string]string{"errors": "Content-Type must be application/json"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	var req struct {
		Query         string                     `json:"query"`
		Variables     map[string]json.RawMessage `json:"variables"`
		OperationName string                     `json:"operationName"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strings.TrimSpace(req.Query) == "" {
		s.count(http.StatusBadRequest)
		writeJSON(w, http.StatusBadRequest, map[string]string{"errors": "Bad Request: the body must be JSON with a query"})
		return
	}
	status, answer := s.execute(served, req.Query, req.Variables, fault != nil && fault.Throttle)
	s.count(status)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if fault != nil && fault.Cut {
		// The whole length announced, half of it sent: the client reads
		// an unexpected EOF.
		s.mu.Lock()
		s.stats.Dropped++
		s.mu.Unlock()
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(status)
		_, _ = w.Write(answer[:len(answer)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

func (s *Server) count(status int) {
	s.mu.Lock()
	s.stats.ByStatus[strconv.Itoa(status)]++
	s.mu.Unlock()
}

// obj is a JSON object that keeps its keys in selection order.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// execution is one request's state.
type execution struct {
	s        *Server
	version  string // the API version served
	vars     map[string]any
	declared map[string]varDef
	used     map[string]bool
	errs     []gqlError
	warnings []any
}

func (s *Server) execute(version, query string, rawVars map[string]json.RawMessage, forceThrottle bool) (int, []byte) {
	answer := func(v obj) []byte { b, _ := json.Marshal(v); return b }
	fail := func(errs ...gqlError) (int, []byte) {
		s.mu.Lock()
		s.stats.GraphQLErrs++
		s.mu.Unlock()
		return http.StatusOK, answer(obj{{"errors", errs}})
	}
	doc, err := parseDocument(query)
	if err != nil {
		pe, _ := err.(*parseError)
		if pe == nil {
			pe = &parseError{msg: err.Error()}
		}
		return fail(gqlError{Message: pe.msg, Locations: []location{{pe.line, pe.col}}})
	}
	ex := &execution{s: s, version: version, vars: map[string]any{}, declared: map[string]varDef{}, used: map[string]bool{}}
	for _, d := range doc.Vars {
		ex.declared[d.Name] = d
		raw, ok := rawVars[d.Name]
		switch {
		case ok:
			var v any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				return fail(errAt(0, 0, "INVALID_VARIABLE", "Variable $%s of type %s was provided invalid value", d.Name, d.Type))
			}
			if msg := checkVarType(d.Type, v); msg != "" {
				return fail(errAt(0, 0, "INVALID_VARIABLE", "Variable $%s of type %s was provided invalid value (%s)", d.Name, d.Type, msg))
			}
			ex.vars[d.Name] = v
		case d.Default != nil:
			v, _ := ex.literal(*d.Default)
			ex.vars[d.Name] = v
		case strings.HasSuffix(d.Type, "!"):
			return fail(errAt(0, 0, "INVALID_VARIABLE", "Variable $%s of type %s was provided invalid value", d.Name, d.Type))
		}
	}
	for name := range rawVars {
		if _, ok := ex.declared[name]; !ok {
			return fail(errAt(0, 0, "variableNotDefined", "Variable $%s is provided but not declared by the operation", name))
		}
	}
	// Validate and price the whole document before anything runs.
	plan := make([]rootPlan, 0, len(doc.Sel))
	requested := 0
	for _, f := range doc.Sel {
		rp := ex.planRoot(f)
		plan = append(plan, rp)
		requested += rp.cost
	}
	for name := range ex.declared {
		if !ex.used[name] {
			ex.errs = append(ex.errs, errAt(0, 0, "variableNotUsed", "Variable $%s is declared by anonymous query but not used", name))
		}
	}
	if len(ex.errs) > 0 {
		return fail(ex.errs...)
	}
	if requested > MaxQueryCost {
		return fail(gqlError{Message: fmt.Sprintf("Query cost is %d, which exceeds the single query max cost limit (%d).", requested, MaxQueryCost),
			Extensions: map[string]any{"code": "MAX_COST_EXCEEDED", "cost": requested, "maxCost": MaxQueryCost, "documentation": docsRates}})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucketFor("")
	status := func(actual any) obj {
		return obj{{"requestedQueryCost", requested}, {"actualQueryCost", actual}, {"throttleStatus", obj{
			{"maximumAvailable", float64(s.opts.BucketSize)}, {"currentlyAvailable", int(math.Floor(b.avail))}, {"restoreRate", float64(s.opts.RestoreRate)},
		}}}
	}
	if forceThrottle || b.avail < float64(requested) {
		s.stats.Throttled++
		s.stats.GraphQLErrs++
		return http.StatusOK, answer(obj{
			{"errors", []gqlError{{Message: "Throttled", Extensions: map[string]any{"code": "THROTTLED", "documentation": docsRates}}}},
			{"extensions", obj{{"cost", status(nil)}}},
		})
	}
	b.avail -= float64(requested)
	data := obj{}
	actual := 0
	for _, rp := range plan {
		v, cost := ex.run(rp)
		data = append(data, kv{rp.f.key(), v})
		actual += cost
	}
	if len(ex.errs) > 0 {
		// A runtime error (a bad cursor): nothing is charged.
		b.avail += float64(requested)
		s.stats.GraphQLErrs++
		return http.StatusOK, answer(obj{{"errors", ex.errs}, {"extensions", obj{{"cost", status(0)}}}})
	}
	b.avail = min(float64(s.opts.BucketSize), b.avail+float64(requested-actual))
	s.stats.CostCharged += int64(actual)
	ext := obj{{"cost", status(actual)}}
	if len(ex.warnings) > 0 {
		ext = append(ext, kv{"search", ex.warnings})
	}
	return http.StatusOK, answer(obj{{"data", data}, {"extensions", ext}})
}

// checkVarType checks a variable's JSON value against the types the
// source's documents declare.
func checkVarType(typ string, v any) string {
	nonNull := strings.HasSuffix(typ, "!")
	base := strings.TrimSuffix(typ, "!")
	if v == nil {
		if nonNull {
			return "null for a non-null type"
		}
		return ""
	}
	if strings.HasPrefix(base, "[") {
		list, ok := v.([]any)
		if !ok {
			return "not a list"
		}
		inner := strings.TrimSuffix(strings.TrimPrefix(base, "["), "]")
		for _, e := range list {
			if msg := checkVarType(inner, e); msg != "" {
				return msg
			}
		}
		return ""
	}
	switch base {
	case "Int":
		n, ok := v.(json.Number)
		if !ok {
			return "not an Int"
		}
		if _, err := n.Int64(); err != nil {
			return "not an Int"
		}
	case "String", "ID":
		if _, ok := v.(string); !ok {
			return "not a " + base
		}
	case "Boolean":
		if _, ok := v.(bool); !ok {
			return "not a Boolean"
		}
	case "CustomerSortKeys":
		if str, ok := v.(string); !ok || !validSortKeys[str] {
			return "not a CustomerSortKeys"
		}
	default:
		return "type " + base + " is not known to this fake Shopify"
	}
	return ""
}

var validSortKeys = map[string]bool{"CREATED_AT": true, "ID": true, "LOCATION": true, "NAME": true, "RELEVANCE": true, "UPDATED_AT": true}

// literal resolves an argument value (variables replaced).
func (ex *execution) literal(v value) (any, bool) {
	switch {
	case v.Var != "":
		if _, ok := ex.declared[v.Var]; !ok {
			return nil, false
		}
		ex.used[v.Var] = true
		return ex.vars[v.Var], true
	case v.Str != nil:
		return *v.Str, true
	case v.Int != nil:
		return json.Number(strconv.FormatInt(*v.Int, 10)), true
	case v.Float != nil:
		return *v.Float, true
	case v.Bool != nil:
		return *v.Bool, true
	case v.Null:
		return nil, true
	case v.IsList:
		out := make([]any, 0, len(v.List))
		for _, e := range v.List {
			x, ok := ex.literal(e)
			if !ok {
				return nil, false
			}
			out = append(out, x)
		}
		return out, true
	}
	return enumValue(v.Enum), true
}

// enumValue is an enum literal (a string variable is not one, but the
// fake takes either for a sort key, as GraphQL coerces variables).
type enumValue string
