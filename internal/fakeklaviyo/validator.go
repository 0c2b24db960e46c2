package fakeklaviyo

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// klaviyoSpec is Klaviyo's public OpenAPI 3 spec of its profile endpoints
// (MIT, see KLAVIYO_SPEC_LICENSE), unmodified.
//
//go:embed klaviyo-profiles.json
var klaviyoSpec []byte

// SpecRevision is the API revision the embedded spec describes (its
// info.version): the revision header value the fake accepts by default.
const SpecRevision = "2026-07-15"

// FirstRevision is Klaviyo's first revision of its date-versioned API.
const FirstRevision = "2022-10-17"

var (
	// ErrNotInSpec: the request's method and path match no operation of the spec.
	ErrNotInSpec = errors.New("fakeklaviyo: no operation of the Klaviyo API spec matches the request")
	// ErrInvalidRequest: the request does not conform to the spec.
	ErrInvalidRequest = errors.New("fakeklaviyo: request does not conform to the Klaviyo API spec")
	// ErrInvalidResponse: a response of the fake does not conform to the spec.
	ErrInvalidResponse = errors.New("fakeklaviyo: response does not conform to the Klaviyo API spec")
	// ErrSpecLoad: the embedded spec could not be loaded.
	ErrSpecLoad = errors.New("fakeklaviyo: cannot load the embedded Klaviyo API spec")
)

// Validator checks requests and responses against the embedded spec. It is
// safe for concurrent use.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

type parsedSpec struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

var spec parsedSpec

// NewValidator returns a Validator; the spec is parsed once per process.
func NewValidator() (*Validator, error) {
	spec.once.Do(func() { spec.doc, spec.router, spec.err = loadSpec() })
	if spec.err != nil {
		return nil, spec.err
	}
	return &Validator{doc: spec.doc, router: spec.router}, nil
}

// loadSpec parses the embedded spec and builds a router. Its one server
// (https://a.klaviyo.com) is replaced in memory by "/" so that requests to
// any host (a fake on 127.0.0.1) match; examples are not validated (some do
// not match their own schemas, which is harmless for checking requests).
func loadSpec() (*openapi3.T, routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(klaviyoSpec)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: parse: %w", ErrSpecLoad, err)
	}
	doc.Servers = openapi3.Servers{{URL: "/"}}
	if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation(),
		openapi3.DisableSchemaDefaultsValidation()); err != nil {
		return nil, nil, fmt.Errorf("%w: validate: %w", ErrSpecLoad, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: router: %w", ErrSpecLoad, err)
	}
	return doc, router, nil
}

// RateLimit is an operation's documented limit (x-klaviyo-ratelimit).
type RateLimit struct {
	Burst  int // per second
	Steady int // per minute
}

// RateLimits returns every operation's documented rate limit, by
// operationId, as the spec's x-klaviyo-ratelimit extensions give them.
func (v *Validator) RateLimits() map[string]RateLimit {
	out := map[string]RateLimit{}
	for _, item := range v.doc.Paths.Map() {
		for _, op := range item.Operations() {
			raw, ok := op.Extensions["x-klaviyo-ratelimit"]
			if !ok {
				continue
			}
			b, _ := json.Marshal(raw)
			var rl struct{ Burst, Steady string }
			if json.Unmarshal(b, &rl) != nil {
				continue
			}
			var r RateLimit
			if _, err := fmt.Sscanf(rl.Burst, "%d/s", &r.Burst); err != nil {
				continue
			}
			if _, err := fmt.Sscanf(rl.Steady, "%d/m", &r.Steady); err != nil {
				continue
			}
			out[op.OperationID] = r
		}
	}
	return out
}

// filterOptions: schema error details (which may quote an e-mail address)
// are left out of messages; formats are checked.
func filterOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:  keyAuth,
		SkipSettingDefaults: true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.DisableSchemaErrorDetails(),
		},
	}
}

// keyAuth accepts the spec's one scheme (an apiKey in the Authorization
// header) when the header has Klaviyo's form, "Klaviyo-API-Key <key>". The
// key's value is the server's business.
func keyAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s == nil || s.Type != "apiKey" || s.In != "header" {
		return fmt.Errorf("security scheme %q is not supported", in.SecuritySchemeName)
	}
	v := in.RequestValidationInput.Request.Header.Get(s.Name)
	if !strings.HasPrefix(v, authPrefix) || strings.TrimSpace(strings.TrimPrefix(v, authPrefix)) == "" {
		return fmt.Errorf("header %s is not %q followed by a key", s.Name, authPrefix)
	}
	return nil
}

// Operation returns the operationId matching r, or ErrNotInSpec.
func (v *Validator) Operation(r *http.Request) (string, error) {
	route, _, err := v.router.FindRoute(r)
	if err != nil {
		return "", fmt.Errorf("%w: %s %s: %w", ErrNotInSpec, r.Method, r.URL.Path, err)
	}
	return route.Operation.OperationID, nil
}

// ValidateRequest checks r (whose body is body; r.Body is not read): route,
// parameters (the revision header among them), the security scheme and the
// JSON:API body. Messages never quote the body's values.
func (v *Validator) ValidateRequest(r *http.Request, body []byte) error {
	in, err := v.requestInput(r, body)
	if err != nil {
		return err
	}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		return fmt.Errorf("%w: %s %s: %s", ErrInvalidRequest, r.Method, in.Route.Path, cleanMessage(err))
	}
	return nil
}

// ValidateResponse checks a response to r against the spec.
func (v *Validator) ValidateResponse(r *http.Request, status int, header http.Header, body []byte) error {
	in, err := v.requestInput(r, nil)
	if err != nil {
		return err
	}
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Options: in.Options,
	}
	rin.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(r.Context(), rin); err != nil {
		return fmt.Errorf("%w: %s %s -> %d: %s", ErrInvalidResponse, r.Method, in.Route.Path, status, cleanMessage(err))
	}
	return nil
}

func (v *Validator) requestInput(r *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	req := r.Clone(r.Context())
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	} else {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrNotInSpec, r.Method, r.URL.Path, err)
	}
	return &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: filterOptions()}, nil
}

// cleanMessage keeps the first line of a kin-openapi error.
func cleanMessage(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}
