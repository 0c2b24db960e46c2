package fakebrevo

import (
	"fmt"
	"net/http"
)

// An identifier conflict: a write that would give a contact an e-mail,
// ext_id or SMS number another contact holds. Brevo has answered it in
// three forms, and a client must read all of them:
//
//   - duplicate_parameter, a message naming the identifier and
//     metadata.duplicate_identifiers listing it (a public report of
//     2024-12, PipedreamHQ/pipedream issue 15034): ConflictCurrent, the
//     default;
//   - the same message and metadata with the code invalid_parameter (a
//     public report of 2026-05, pass-culture/pass-culture-main pull
//     request 22628): ConflictInvalidParameter;
//   - duplicate_parameter with "Contact already exist" for a taken e-mail,
//     and no metadata at all (PipedreamHQ/pipedream issue 12687, 2024-07):
//     ConflictLegacy.
//
// The public reports only show "email" in duplicate_identifiers; the fake
// names the others "ext_id" and "sms".

// Options.ConflictAnswer values.
const (
	ConflictCurrent          = ""
	ConflictInvalidParameter = "invalid_parameter"
	ConflictLegacy           = "legacy"
)

// ConflictAnswers are the accepted Options.ConflictAnswer values.
var ConflictAnswers = []string{ConflictCurrent, ConflictInvalidParameter, ConflictLegacy}

// Identifiers as metadata.duplicate_identifiers names them.
const (
	identEmail = "email"
	identExtID = "ext_id"
	identSMS   = "sms"
)

// msgLegacyDuplicateEmail is the older answer to a taken e-mail.
const msgLegacyDuplicateEmail = "Contact already exist"

// errorMetadata is the metadata of an identifier conflict.
type errorMetadata struct {
	DuplicateIdentifiers []string `json:"duplicate_identifiers"`
}

// conflictBody is the error answering a conflict on ident, in the form
// Options.ConflictAnswer picks; msg is the current message.
func (s *Server) conflictBody(ident, msg string) *errorBody {
	meta := &errorMetadata{DuplicateIdentifiers: []string{ident}}
	switch s.opts.ConflictAnswer {
	case ConflictInvalidParameter:
		return &errorBody{Code: CodeInvalidParameter, Message: msg, Metadata: meta}
	case ConflictLegacy:
		if ident == identEmail {
			msg = msgLegacyDuplicateEmail
		}
		return &errorBody{Code: CodeDuplicateParameter, Message: msg}
	}
	return &errorBody{Code: CodeDuplicateParameter, Message: msg, Metadata: meta}
}

// conflict answers c with a conflict on ident (400).
func (s *Server) conflict(c *call, ident, msg string) {
	s.respond(c, http.StatusBadRequest, *s.conflictBody(ident, msg))
}

func checkConflictAnswer(v string) error {
	for _, a := range ConflictAnswers {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("%w: ConflictAnswer must be empty, %q or %q", ErrBadOptions, ConflictInvalidParameter, ConflictLegacy)
}
