package hubspot

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/destination"
)

// maxMessageLen bounds a HubSpot message kept (bytes, on a rune boundary).
const maxMessageLen = 1000

// APIError is a non-2xx answer from HubSpot, decoded from its error JSON
// ({status, message, correlationId, category, context}). Its Error text
// never holds an e-mail address (HubSpot's messages may name one).
type APIError struct {
	// Route is the request's method and path template.
	Route  string
	Status int
	// Category is HubSpot's (VALIDATION_ERROR, CONFLICT, OBJECT_NOT_FOUND, ...).
	Category string
	// Message is HubSpot's message, as sent (may name a contact).
	Message string
	// HubSpots: the body was HubSpot's error JSON, not a web server's or a
	// proxy's page at base_url: only then does a 400, 409 or 422 judge the
	// records (docs/guide.md#http-answers-proxies-and-tls).
	HubSpots bool
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("hubspot: %s: HTTP %d", e.Route, e.Status)
	if e.Category != "" {
		s += " " + destination.Redact(e.Category)
	}
	if m := destination.Redact(e.Message); m != "" {
		s += ": " + m
	}
	return s
}

// decodeAPIError reads HubSpot's error JSON, or keeps the start of body.
func decodeAPIError(route string, status int, body []byte) *APIError {
	e := &APIError{Route: route, Status: status}
	var m struct {
		Message  string `json:"message"`
		Category string `json:"category"`
	}
	if json.Unmarshal(body, &m) == nil && (m.Message != "" || m.Category != "") {
		e.Message, e.Category = truncate(m.Message, maxMessageLen), truncate(m.Category, 100)
		e.HubSpots = true
		return e
	}
	e.Message = truncate(strings.TrimSpace(string(body)), 200)
	return e
}

// rejection is the stored message of a rejected record: HubSpot's own,
// e-mail addresses redacted.
func rejection(category, message string, status int) string {
	message = destination.Redact(truncate(message, maxMessageLen))
	switch {
	case category != "" && message != "":
		return destination.Redact(category) + ": " + message
	case message != "":
		return message
	case category != "":
		return destination.Redact(category)
	}
	return fmt.Sprintf("HTTP %d", status)
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

// batchResponse is the body of a batch answer (200, 201 or 207).
type batchResponse struct {
	Results []object     `json:"results"`
	Errors  []batchError `json:"errors"`
}

// object is one contact of a batch answer.
type object struct {
	ID         string             `json:"id"`
	Properties map[string]*string `json:"properties"`
}

// batchError is one entry of a 207's errors[]: context.ids names the inputs.
type batchError struct {
	Category string `json:"category"`
	Message  string `json:"message"`
	Context  struct {
		IDs []string `json:"ids"`
	} `json:"context"`
}
