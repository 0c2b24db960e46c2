package apiclient

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/oncesync/oncesync/internal/destination"
)

// ErrOutcomeUnknown: a write's answer was lost or ambiguous (a cut
// connection, 500, 502, 504, 408), so it may or may not have been applied.
// A request that is not idempotent is not retried then; the caller settles
// it (reads the destination back, or leaves the records in doubt).
var ErrOutcomeUnknown = errors.New("the write's outcome is unknown")

// TransportError is an attempt that got no HTTP answer. It replaces
// *url.Error, whose text holds the request's URL.
type TransportError struct {
	Prefix string
	Route  string
	Err    error
}

func (e *TransportError) Error() string { return prefixed(e.Prefix, e.Route+": "+e.Err.Error()) }
func (e *TransportError) Unwrap() error { return e.Err }

// StatusError is a non-2xx answer; its text holds the route and the status
// only.
type StatusError struct {
	Prefix string
	Route  string
	Status int
}

func (e *StatusError) Error() string {
	return prefixed(e.Prefix, fmt.Sprintf("%s: HTTP %d", e.Route, e.Status))
}

// RedirectError is a 3xx answer, which oncesync never follows. Location is
// the origin (scheme and host) it pointed to, "" when absent or relative.
type RedirectError struct {
	Prefix   string
	Route    string
	Status   int
	Location string
}

func (e *RedirectError) Error() string {
	where := ""
	if e.Location != "" {
		where = " to " + e.Location
	}
	return prefixed(e.Prefix, fmt.Sprintf("%s: HTTP %d redirect%s, not followed", e.Route, e.Status, where))
}

func prefixed(prefix, s string) string {
	if prefix == "" {
		return s
	}
	return prefix + ": " + s
}

// origin returns scheme://host of an absolute URL, else "". Only the
// origin is kept: a path or query may carry a token.
func origin(loc string) string {
	u, err := url.Parse(strings.TrimSpace(loc))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// notSentError marks a cause as provably not applied: errors.Is(err,
// destination.ErrNotSent) holds, without changing the cause's text (a 429
// did reach the server; it just did not process the request).
type notSentError struct{ err error }

func (e *notSentError) Error() string        { return e.err.Error() }
func (e *notSentError) Unwrap() error        { return e.err }
func (e *notSentError) Is(target error) bool { return target == destination.ErrNotSent }

// Redact replaces anything that looks like an e-mail address in s (or a
// URL's user information) with "[email]" (destination.Redact).
func Redact(s string) string { return destination.Redact(s) }

// safeError hides secrets and e-mail addresses from an error's text,
// keeping the chain for errors.Is/As.
type safeError struct {
	err     error
	secrets []string
}

func (e *safeError) Error() string { return Redact(HideSecrets(e.err.Error(), e.secrets)) }

// hideSecretBytes is HideSecrets of a response body; b itself when it
// holds none.
func hideSecretBytes(b []byte, secrets []string) []byte {
	for _, sec := range secrets {
		if sec != "" && bytes.Contains(b, []byte(sec)) {
			b = bytes.ReplaceAll(b, []byte(sec), []byte("[redacted]"))
		}
	}
	return b
}

// HideSecrets replaces every non-empty secret in s with "[redacted]".
func HideSecrets(s string, secrets []string) string {
	// Longest first: a secret inside a longer one ("Bearer X" and X) goes
	// with it.
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

func (e *safeError) Unwrap() error { return e.err }
