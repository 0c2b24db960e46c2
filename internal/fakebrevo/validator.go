package fakebrevo

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// brevoSwagger is Brevo's public API spec (Swagger 2.0, MIT), unmodified; see
// BREVO_SPEC_LICENSE.
//
//go:embed brevo-swagger.yaml
var brevoSwagger []byte

// BasePath is the path prefix of every Brevo API route ("/v3").
const BasePath = "/v3"

var (
	// ErrNotInSpec means the request's method and path match no operation of
	// Brevo's API spec.
	ErrNotInSpec = errors.New("fakebrevo: no operation of the Brevo API spec matches the request")
	// ErrInvalidRequest means the request does not conform to Brevo's API spec.
	ErrInvalidRequest = errors.New("fakebrevo: request does not conform to the Brevo API spec")
	// ErrInvalidResponse means a response does not conform to Brevo's API spec.
	ErrInvalidResponse = errors.New("fakebrevo: response does not conform to the Brevo API spec")
	// ErrSpecLoad means the embedded spec could not be loaded.
	ErrSpecLoad = errors.New("fakebrevo: cannot load the embedded Brevo API spec")
)

// Validator checks HTTP requests and responses against Brevo's embedded API
// spec. It is safe for concurrent use.
type Validator struct {
	doc     *openapi3.T
	router  routers.Router
	patches []string
}

// parsedSpec is the converted spec, built once per process: the YAML is 650 KB
// and the parsed document is immutable after loading.
type parsedSpec struct {
	once    sync.Once
	doc     *openapi3.T
	router  routers.Router
	patches []string
	err     error
}

var spec parsedSpec

// NewValidator returns a Validator for Brevo's API spec. The spec is parsed and
// converted to OpenAPI 3 once per process; later calls are cheap.
func NewValidator() (*Validator, error) {
	spec.once.Do(func() { spec.doc, spec.router, spec.patches, spec.err = loadSpec() })
	if spec.err != nil {
		return nil, spec.err
	}
	return &Validator{doc: spec.doc, router: spec.router, patches: spec.patches}, nil
}

// SpecPatches lists the in-memory patches applied to the embedded spec so
// kin-openapi can use it (see loadSpec), one line each.
func (v *Validator) SpecPatches() []string { return append([]string(nil), v.patches...) }

// loadSpec parses the embedded Swagger 2 document, converts it to OpenAPI 3,
// patches the quirks that stop kin-openapi from using it, and builds a router.
//
// Patches (in memory; the embedded file is unmodified):
//   - responses that $ref a schema definition instead of a response
//     (createBatchOrder's 202: `$ref: "#/definitions/createdBatchId"`) are
//     rewritten as a response whose schema is that definition;
//   - paths that differ only by the name of a path parameter (GET
//     /smtp/emailStatus/{batchId} and /smtp/emailStatus/{messageId}) are
//     ambiguous; the first in sorted order is kept;
//   - servers: the converted document's only server is
//     https://api.brevo.com/v3; it is replaced by the relative server "/v3" so
//     requests to any host and scheme (a fake on 127.0.0.1, a proxy) match.
//   - document validation is run with examples and schema-defaults
//     validation disabled: several of Brevo's examples do not match their own
//     schemas, which is harmless for request checking.
//   - getProcess.status (a response schema only) also admits processing,
//     failed and cancelled: Brevo's current reference lists them and the
//     fake answers failed for a process that failed whole. Requests are
//     checked against the spec as published.
//   - getAttributes_attributes.type (a response schema only) also admits
//     multiple-choice: createAttribute's type enum in the same spec creates
//     such attributes, and Brevo's current reference
//     (developers.brevo.com/reference/get-attributes) lists each attribute
//     "along with ... options for multiple-choice-type attributes".
func loadSpec() (*openapi3.T, routers.Router, []string, error) {
	var doc2 openapi2.T
	if err := openapi2.UnmarshalFromData(brevoSwagger, &doc2); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: parse: %w", ErrSpecLoad, err)
	}
	patched := patchSwagger(&doc2)
	doc, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: convert to OpenAPI 3: %w", ErrSpecLoad, err)
	}
	doc.Servers = openapi3.Servers{{URL: BasePath}}
	ctx := context.Background()
	if err := doc.Validate(ctx,
		openapi3.DisableExamplesValidation(),
		openapi3.DisableSchemaDefaultsValidation(),
	); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: validate: %w", ErrSpecLoad, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: router: %w", ErrSpecLoad, err)
	}
	return doc, router, patched, nil
}

var pathParam = regexp.MustCompile(`\{[^{}]*\}`)

// patchSwagger rewrites the Swagger 2 document's quirks (see loadSpec) and
// returns what it patched, as "METHOD path status" entries.
func patchSwagger(doc *openapi2.T) []string {
	var patched []string
	// Paths that differ only by parameter names cannot be told apart by any
	// router; keep the first in sorted order.
	paths := make([]string, 0, len(doc.Paths))
	for path := range doc.Paths {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	seen := make(map[string]string, len(paths))
	for _, path := range paths {
		shape := pathParam.ReplaceAllString(path, "{}")
		if first, ok := seen[shape]; ok {
			delete(doc.Paths, path)
			patched = append(patched, "drop "+path+" (same route as "+first+")")
			continue
		}
		seen[shape] = path
	}
	for path, item := range doc.Paths {
		for method, op := range item.Operations() {
			for status, resp := range op.Responses.Map() {
				if resp == nil || !strings.HasPrefix(resp.Ref, "#/definitions/") {
					continue
				}
				op.Responses.Set(status, &openapi2.Response{
					Description: strings.TrimPrefix(resp.Ref, "#/definitions/"),
					Schema:      &openapi2.SchemaRef{Ref: resp.Ref},
				})
				patched = append(patched, method+" "+path+" "+status)
			}
		}
	}
	if def := doc.Definitions["getProcess"]; def != nil && def.Value != nil {
		if st := def.Value.Properties["status"]; st != nil && st.Value != nil {
			for _, v := range processStatusesBeyondSpec {
				if !slices.Contains(st.Value.Enum, any(v)) {
					st.Value.Enum = append(st.Value.Enum, v)
				}
			}
			patched = append(patched, "getProcess.status enum + "+strings.Join(processStatusesBeyondSpec, ", "))
		}
	}
	if def := doc.Definitions["getAttributes_attributes"]; def != nil && def.Value != nil {
		if typ := def.Value.Properties["type"]; typ != nil && typ.Value != nil && !slices.Contains(typ.Value.Enum, any(multipleChoice)) {
			typ.Value.Enum = append(typ.Value.Enum, multipleChoice)
			patched = append(patched, "getAttributes_attributes.type enum + "+multipleChoice)
		}
	}
	sort.Strings(patched)
	return patched
}

// processStatusesBeyondSpec are the process statuses Brevo's current
// reference lists beyond swagger.yaml's queued, in_process and completed.
var processStatusesBeyondSpec = []string{"processing", ProcessFailed, "cancelled"}

// emailFormat checks the spec's "email" string format (kin-openapi does not
// check it by default). It only catches obviously wrong addresses, like
// kin-openapi's own FormatOfStringForEmail.
var emailFormat = openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForEmail)

// filterOptions are the openapi3filter options shared by request and response
// validation. Schema error details (which quote the offending value, possibly
// an e-mail address) are left out of error messages.
func filterOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:  headerKeyAuth,
		SkipSettingDefaults: true,
		MultiError:          false,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.WithStringFormatValidator("email", emailFormat),
			openapi3.DisableSchemaErrorDetails(),
		},
	}
}

// headerKeyAuth accepts a security scheme of type apiKey when its header (or
// query parameter) is present and non-empty. It does not check the value:
// that is the server's business.
func headerKeyAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s == nil || s.Type != "apiKey" {
		return fmt.Errorf("security scheme %q is not supported", in.SecuritySchemeName)
	}
	req := in.RequestValidationInput.Request
	var v string
	switch s.In {
	case "header":
		v = req.Header.Get(s.Name)
	case "query":
		v = req.URL.Query().Get(s.Name)
	}
	if v == "" {
		return fmt.Errorf("missing %s %q", s.In, s.Name)
	}
	return nil
}

// Operation returns the operationId of the spec operation matching r (e.g.
// "createContact"), or ErrNotInSpec.
func (v *Validator) Operation(r *http.Request) (string, error) {
	route, _, err := v.router.FindRoute(r)
	if err != nil {
		return "", fmt.Errorf("%w: %s %s: %w", ErrNotInSpec, r.Method, redactPath(r.URL.Path), err)
	}
	return route.Operation.OperationID, nil
}

// ValidateRequest checks r against the spec: the route, path and query
// parameters, headers (api-key presence) and, when the operation has one, the
// JSON body. body is r's body (r.Body is not read). It returns nil when r
// conforms, an error wrapping ErrNotInSpec when no operation matches, and one
// wrapping ErrInvalidRequest otherwise. Messages never quote the body's values.
func (v *Validator) ValidateRequest(r *http.Request, body []byte) error {
	in, err := v.requestInput(r, body)
	if err != nil {
		return err
	}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		return fmt.Errorf("%w: %s %s: %s", ErrInvalidRequest, r.Method, BasePath+in.Route.Path, cleanMessage(err))
	}
	return nil
}

// ValidateResponse checks a response to r (status, headers, JSON body) against
// the spec. Statuses the operation does not document (429, 503) are accepted,
// as kin-openapi does by default. It returns an error wrapping ErrNotInSpec or
// ErrInvalidResponse.
func (v *Validator) ValidateResponse(r *http.Request, status int, header http.Header, body []byte) error {
	in, err := v.requestInput(r, nil)
	if err != nil {
		return err
	}
	if header.Get("Content-Type") == "" && len(body) == 0 {
		header = header.Clone()
		header.Set("Content-Type", "application/json")
	}
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Options:                in.Options,
	}
	rin.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(r.Context(), rin); err != nil {
		return fmt.Errorf("%w: %s %s -> %d: %s", ErrInvalidResponse, r.Method, BasePath+in.Route.Path, status, cleanMessage(err))
	}
	return nil
}

func (v *Validator) requestInput(r *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	// Work on a copy: openapi3filter reads (and may replace) the body.
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
		return nil, fmt.Errorf("%w: %s %s: %w", ErrNotInSpec, r.Method, redactPath(r.URL.Path), err)
	}
	return &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options:    filterOptions(),
	}, nil
}

// redactPath replaces the path segments that look like an e-mail address
// (contact identifiers) with "{identifier}", so errors carry no personal data.
func redactPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.Contains(s, "@") || strings.Contains(strings.ToLower(s), "%40") {
			segs[i] = "{identifier}"
		}
	}
	return strings.Join(segs, "/")
}

// cleanMessage flattens a kin-openapi error into one line without schema
// dumps.
func cleanMessage(err error) string {
	msg := err.Error()
	// kin-openapi appends "\nSchema:\n..." and "\nValue:\n..." blocks when
	// details are enabled; keep only the first line either way.
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}
