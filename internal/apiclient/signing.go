package apiclient

import (
	"encoding/base64"
	"strings"
)

// SigningKey is the HMAC key of a Standard Webhooks secret (the webhook
// destination's and the alert webhook's): after the "whsec_" prefix,
// base64 decoded, padded or not, as the official libraries accept it; any
// other secret's bytes as they are. ok is false for a prefixed secret that
// does not decode to at least one byte.
func SigningKey(secret string) (key []byte, ok bool) {
	rest, prefixed := strings.CutPrefix(secret, "whsec_")
	if !prefixed {
		return []byte(secret), true
	}
	rest = strings.TrimRight(rest, "=")
	k, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil || len(k) == 0 {
		return nil, false
	}
	return k, true
}
