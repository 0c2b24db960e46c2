package brevo

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
)

// maxMessageLen bounds a decoded Brevo message (bytes, cut on a rune boundary).
const maxMessageLen = 1000

// ErrNoVerify is returned by Verify when the destination cannot tell whether
// the records landed yet (an import process is still running).
var ErrNoVerify = errors.New("brevo: cannot verify yet")

// ErrOutcomeUnknown: a write's answer was lost or ambiguous (a cut
// connection, 500, 502, 504, 408), so it may or may not have been applied.
// It is not retried blindly; the records are settled by reading Brevo back.
// It is the shared HTTP layer's sentinel.
var ErrOutcomeUnknown = apiclient.ErrOutcomeUnknown

// APIError is a non-2xx answer from Brevo, decoded from its error model
// ({code, message}). Its Error text never holds the API key or an e-mail
// address: Message is redacted when formatted (the raw Message field may hold
// personal data and is only stored as a rejected record's message).
type APIError struct {
	// Route is the request's method and path template, e.g. "POST /contacts".
	Route string
	// Status is the HTTP status code.
	Status int
	// Code is Brevo's error code (e.g. "invalid_parameter"); may be empty.
	Code string
	// Message is Brevo's readable message, as sent (may name a contact).
	Message string
	// Duplicates are the identifiers metadata.duplicate_identifiers names,
	// lower-cased ("email", "ext_id", ...): an identifier conflict.
	Duplicates []string
	// Brevos: the body was Brevo's error model ({code, message}, which
	// every error response of ../shared/brevo/swagger.yaml has), not a
	// web server's or a proxy's page at base_url.
	Brevos bool
}

// says reports whether Brevo itself answered one of statuses. A 400 or 404
// judges a record (refused, absent, not found for an update) only when it
// is Brevo's: a proxy's or a web server's 404 page says nothing of a
// contact, and reading it as "absent" would send an applied write again
// (docs/guide.md#http-answers-proxies-and-tls).
func (e *APIError) says(statuses ...int) bool {
	return e.Brevos && slices.Contains(statuses, e.Status)
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("brevo: %s: HTTP %d", e.Route, e.Status)
	if e.Code != "" {
		s += " " + redact(e.Code)
	}
	if m := redact(e.Message); m != "" {
		s += ": " + m
	}
	return s
}

// DecodeError decodes a Brevo error body ({"code": ..., "message": ...}). ok
// is false when body is not a JSON object carrying a string code or message.
// message is cut to 1000 bytes on a rune boundary; both are valid UTF-8.
func DecodeError(body []byte) (code, message string, ok bool) {
	var m struct {
		Code    *string `json:"code"`
		Message *string `json:"message"`
	}
	// Only an object decodes into the struct without error; but "null"
	// decodes too, leaving both nil, which is rejected below.
	if err := json.Unmarshal(body, &m); err != nil {
		return "", "", false
	}
	if m.Code == nil && m.Message == nil {
		return "", "", false
	}
	if m.Code != nil {
		code = truncate(*m.Code, 100)
	}
	if m.Message != nil {
		message = truncate(*m.Message, maxMessageLen)
	}
	if code == "" && message == "" {
		return "", "", false
	}
	return code, message, true
}

// decodeDuplicates reads metadata.duplicate_identifiers of a Brevo error
// body, lower-cased; nil when there is none.
func decodeDuplicates(body []byte) []string {
	var m struct {
		Metadata struct {
			DuplicateIdentifiers []string `json:"duplicate_identifiers"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	var out []string
	for _, id := range m.Metadata.DuplicateIdentifiers {
		if id = strings.ToLower(strings.TrimSpace(id)); id != "" && len(out) < 10 {
			out = append(out, truncate(id, 40))
		}
	}
	return out
}

// Brevo has answered an identifier conflict (a write naming an e-mail,
// ext_id or SMS number another contact holds) in several forms:
// duplicate_parameter with metadata.duplicate_identifiers listing the
// identifiers, the same with invalid_parameter (since 2026), and
// duplicate_parameter with "Contact already exist" and no metadata for a
// taken e-mail (fakebrevo/conflict.go cites the public reports).

// conflicts reports whether e is an identifier conflict, and on which
// identifiers when Brevo says ("email", "ext_id", "sms"; none when it
// does not).
func (e *APIError) conflicts() (idents []string, ok bool) {
	if e.Status != http.StatusBadRequest {
		return nil, false
	}
	if len(e.Duplicates) > 0 {
		return e.Duplicates, true
	}
	msg := strings.ToLower(e.Message)
	switch {
	case e.Code == codeDuplicateParameter:
	case e.Code == codeInvalidParameter && (strings.Contains(msg, "already associated") || strings.Contains(msg, "already exist")):
	default:
		return nil, false
	}
	if strings.Contains(msg, "contact already exist") {
		return []string{identEmail}, true
	}
	for _, id := range []string{identEmail, identExtID, identSMS} {
		if strings.Contains(msg, id) {
			idents = append(idents, id)
		}
	}
	return idents, true
}

// conflictOn reports whether e is an identifier conflict on ident; when
// Brevo does not say on which, unnamed decides.
func (e *APIError) conflictOn(ident string, unnamed bool) bool {
	idents, ok := e.conflicts()
	switch {
	case !ok:
		return false
	case len(idents) == 0:
		return unnamed
	}
	return slices.Contains(idents, ident)
}

// Error codes and identifier names of Brevo's conflicts.
const (
	codeDuplicateParameter = "duplicate_parameter"
	codeInvalidParameter   = "invalid_parameter"
	identEmail             = "email"
	identExtID             = "ext_id"
	identSMS               = "sms"
)

// truncate cuts s to at most n bytes without splitting a rune and makes it
// valid UTF-8.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// redact removes anything that looks like an e-mail address from s.
func redact(s string) string { return destination.Redact(s) }

// safeError wraps an error so that its text holds neither the API key nor an
// e-mail address, keeping the chain for errors.Is/As.
type safeError struct {
	err    error
	secret string
}

func (e *safeError) Error() string {
	s := redact(e.err.Error())
	if e.secret != "" {
		s = strings.ReplaceAll(s, e.secret, "[api-key]")
	}
	return s
}

func (e *safeError) Unwrap() error { return e.err }
