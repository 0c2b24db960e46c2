package fakebrevo

import "strings"

// A contact's SMS number, as Brevo keeps it:
//   - in one form, digits with the country code ("33058407250" in
//     swagger.yaml's contact examples), whatever form it was written in: the
//     reference accepts "91xxxxxxxxxx", "+91xxxxxxxxxx" and
//     "0091xxxxxxxxxx", its changelog "+44 (0)7771234567" and
//     "+1 (206) 123-4567". So a client that reads a contact back sees
//     digits, not what it sent.
//   - owned by one contact: createContact and updateContact refuse another
//     contact's number with duplicate_parameter (changelog, 2020-04-29:
//     "error for duplicate SMS will now be thrown if the SMS is updated to a
//     number which belongs to an already existing contact"), and an import
//     skips such a row, reported as duplicate_phone_id. Brevo's help centre
//     says an import row that links two contacts' identifiers merges them;
//     which of the two an API import does is not documented, and the fake
//     skips it, as it does a row whose ext_id is another contact's
//     (imports.go).
//
// A value with no digit is kept as it was (Brevo's answer to it is not
// documented). WHATSAPP and LANDLINE_NUMBER are not modelled.
const smsAttribute = "SMS"

// msgDuplicateSMS is Brevo's message for another contact's SMS number.
const msgDuplicateSMS = "Unable to update contact, SMS is already associated with another Contact"

// normPhone is a phone number in Brevo's stored form: the national trunk
// "(0)" dropped, digits only, without an international "00" prefix.
func normPhone(s string) string {
	s = strings.ReplaceAll(s, "(0)", "")
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	d := strings.TrimPrefix(b.String(), "00")
	if d == "" {
		return s
	}
	return d
}

// normSMS rewrites attrs' SMS value (names already upper-cased) in Brevo's
// stored form and returns it ("" when attrs set none).
func normSMS(attrs map[string]any) string {
	v, ok := attrs[smsAttribute].(string)
	if !ok || strings.TrimSpace(v) == "" {
		return ""
	}
	n := normPhone(v)
	attrs[smsAttribute] = n
	return n
}

// smsOwner is the contact other than self that holds number, if any.
func (st *state) smsOwner(number string, self *contact) *contact {
	if number == "" {
		return nil
	}
	if other := st.bySMS[number]; other != nil && other != self {
		return other
	}
	return nil
}

// indexSMS keeps st.bySMS in step with ct's SMS attribute, which was old.
func (st *state) indexSMS(ct *contact, old any) {
	if o, ok := old.(string); ok && st.bySMS[o] == ct {
		delete(st.bySMS, o)
	}
	if n, ok := ct.attrs[smsAttribute].(string); ok && n != "" {
		st.bySMS[n] = ct
	}
}
