package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// FingerprintVersion prefixes every Fingerprint; a later change of what a
// fingerprint covers changes it, so that two versions never compare theirs.
const FingerprintVersion = "f1"

// fingerprintParts are the parts of a sync a fingerprint covers, in the
// order it lists them and DriftParts names them.
var fingerprintParts = []string{"source", "mapping", "destination", "settings", "redis_namespace"}

// Fingerprint identifies what a run of s does, as this process's config
// says it (docs/guide.md#one-config-on-every-machine): its source, mapping,
// destination (with their secrets: an API key changed on one machine only
// writes to another account), its other settings but the schedule (which
// only the leader reads) and the Redis namespace its leases live in. Each
// part is a short hash, so that two processes' fingerprints name the parts
// that differ (DriftParts) and no secret can be read back from one.
func (s Sync) Fingerprint(redisNamespace string) (string, error) {
	def, err := s.DefinitionJSON()
	if err != nil {
		return "", err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(def), &obj); err != nil {
		return "", err
	}
	var srcSecrets, destSecrets []string
	if s.Source.Spec != nil {
		srcSecrets = s.Source.Spec.Secrets()
	}
	if s.Destination.Spec != nil {
		destSecrets = s.Destination.Spec.Secrets()
	}
	rest := make(map[string]json.RawMessage, len(obj))
	for k, v := range obj {
		switch k {
		case "source", "mapping", "destination", "schedule":
		default:
			rest[k] = v
		}
	}
	restJSON, err := json.Marshal(rest) // map keys sorted: canonical
	if err != nil {
		return "", err
	}
	parts := [][]string{
		append([]string{string(obj["source"])}, srcSecrets...),
		{string(obj["mapping"])},
		append([]string{string(obj["destination"])}, destSecrets...),
		{string(restJSON), s.HeartbeatURL},
		{redisNamespace},
	}
	var b strings.Builder
	b.WriteString(FingerprintVersion)
	for _, p := range parts {
		h := sha256.New()
		for _, v := range p {
			fmt.Fprintf(h, "%d:%s;", len(v), v)
		}
		fmt.Fprintf(&b, ".%s", hex.EncodeToString(h.Sum(nil))[:8])
	}
	return b.String(), nil
}

// DriftParts names the parts in which two fingerprints differ ("source",
// "mapping", "destination", "settings", "redis_namespace"); every part when
// they are of different versions. Nil when they are equal.
func DriftParts(a, b string) []string {
	if a == b {
		return nil
	}
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if len(pa) != len(fingerprintParts)+1 || len(pb) != len(pa) || pa[0] != pb[0] {
		return append([]string(nil), fingerprintParts...)
	}
	var out []string
	for i, name := range fingerprintParts {
		if pa[i+1] != pb[i+1] {
			out = append(out, name)
		}
	}
	return out
}
