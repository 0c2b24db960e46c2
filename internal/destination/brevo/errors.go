package brevo

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/oncesync/oncesync/internal/destination"
	"strings"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/apiclient"
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
