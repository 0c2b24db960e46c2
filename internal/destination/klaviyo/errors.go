package klaviyo

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
)

// ErrOutcomeUnknown: a write's answer was lost or ambiguous; the records
// are settled by reading Klaviyo back (the shared HTTP layer's sentinel).
var ErrOutcomeUnknown = apiclient.ErrOutcomeUnknown

// APIError is a non-2xx answer from Klaviyo, decoded from its error
// document ({"errors":[{id, code, title, detail, source}]}, the first
// error). Its Error text is redacted of e-mail addresses.
type APIError struct {
	Route     string
	Status    int
	Code      string
	Title     string
	Detail    string
	Pointer   string
	Parameter string
	// DuplicateID is meta.duplicate_profile_id of a 409 duplicate_profile.
	DuplicateID string
	// Klaviyos: the body was Klaviyo's error document, not a web server's
	// or a proxy's page at base_url: only then does a 400, 404, 409 or
	// 422 judge a record or a resource
	// (docs/guide.md#http-answers-proxies-and-tls).
	Klaviyos bool
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("klaviyo: %s: HTTP %d", e.Route, e.Status)
	if e.Code != "" {
		s += " " + destination.Redact(e.Code)
	}
	if m := destination.Redact(e.Detail); m != "" {
		s += ": " + m
	}
	return s
}

// message is what a rejected record stores: Klaviyo's words, redacted.
func (e *APIError) message() string {
	var parts []string
	if e.Code != "" {
		parts = append(parts, e.Code)
	}
	if e.Detail != "" {
		parts = append(parts, e.Detail)
	} else if e.Title != "" {
		parts = append(parts, e.Title)
	}
	if len(parts) == 0 {
		return fmt.Sprintf("klaviyo answered HTTP %d", e.Status)
	}
	return truncate(destination.Redact("klaviyo refused this profile: "+strings.Join(parts, ": ")), 1000)
}

func decodeAPIError(route string, status int, body []byte) *APIError {
	e := &APIError{Route: route, Status: status}
	var doc struct {
		Errors []struct {
			Code   string `json:"code"`
			Title  string `json:"title"`
			Detail string `json:"detail"`
			Source struct {
				Pointer   string `json:"pointer"`
				Parameter string `json:"parameter"`
			} `json:"source"`
			Meta struct {
				DuplicateProfileID string `json:"duplicate_profile_id"`
			} `json:"meta"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &doc) == nil && len(doc.Errors) > 0 {
		x := doc.Errors[0]
		e.Code, e.Title, e.Detail = truncate(x.Code, 100), truncate(x.Title, 200), truncate(x.Detail, 1000)
		e.Pointer, e.Parameter, e.DuplicateID = truncate(x.Source.Pointer, 200), truncate(x.Source.Parameter, 100), truncate(x.Meta.DuplicateProfileID, 100)
		e.Klaviyos = true
		return e
	}
	e.Detail = truncate(strings.TrimSpace(string(body)), 200)
	return e
}

// truncate cuts s to at most n bytes on a rune boundary, valid UTF-8.
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

// safeError hides the API key and e-mail addresses from an error's text,
// keeping the chain for errors.Is/As.
type safeError struct {
	err    error
	secret string
}

func (e *safeError) Error() string {
	s := destination.Redact(e.err.Error())
	if e.secret != "" {
		s = strings.ReplaceAll(s, e.secret, "[api-key]")
	}
	return s
}

func (e *safeError) Unwrap() error { return e.err }
