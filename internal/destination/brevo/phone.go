package brevo

import (
	"fmt"
	"strings"
)

// smsAttribute is the attribute holding a contact's SMS number.
const smsAttribute = "SMS"

// Brevo keeps an SMS number in one form, digits with the country code
// ("33058407250" in swagger.yaml's examples), whatever form it was written
// in ("+33...", "0033...", "+44 (0)7771 234567" are all accepted). So a
// number read back, or named by an import's report, is compared in that
// form: compared as written, every in-doubt record with a formatted number
// would look "not landed" and be written twice.

// phoneKey is s in Brevo's stored form: the national trunk "(0)" dropped,
// digits only, without an international "00" prefix ("" when s has no
// digit).
func phoneKey(s string) string {
	s = strings.ReplaceAll(s, "(0)", "")
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return strings.TrimPrefix(b.String(), "00")
}

// samePhone says whether Brevo's value got is the number want.
func samePhone(want, got any) bool {
	w, g := phoneKey(fmt.Sprint(want)), phoneKey(fmt.Sprint(got))
	if w == "" || g == "" {
		return ValuesEqual(want, got) // not a number: as any value
	}
	return w == g
}
