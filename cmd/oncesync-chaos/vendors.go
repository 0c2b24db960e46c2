package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/fakehubspot"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// Syncs to HubSpot and Klaviyo among the Brevo ones (issue 16): each has a
// CSV source of its own that grows and changes like the Brevo syncs', and
// its values are compared at its vendor's fake, not at the fake Brevo.

// vendorView is what the checkers read of a vendor's fake.
type vendorView interface {
	// first is the first name the fake holds for email.
	first(email string) (string, bool)
	duplicates() (int64, []string)
	name() string
}

// Test credentials of the vendor fakes (not secrets).
const (
	chaosHubSpotToken = "pat-na1-chaos-0123456789"
	chaosKlaviyoKey   = "pk_chaos_0123456789abcdef0123"
)

type hubspotView struct{ f *fakehubspot.Server }

func (v hubspotView) first(email string) (string, bool) {
	c, ok := v.f.Contact(email)
	return c.Properties["firstname"], ok
}
func (v hubspotView) duplicates() (int64, []string) {
	st := v.f.Stats()
	return st.DuplicateWrites, st.DuplicateExamples
}
func (hubspotView) name() string { return "hubspot" }

type klaviyoView struct{ f *fakeklaviyo.Server }

func (v klaviyoView) first(email string) (string, bool) {
	p, ok := v.f.Profile(email)
	return fmt.Sprint(p.Attributes["first_name"]), ok
}
func (v klaviyoView) duplicates() (int64, []string) {
	st := v.f.Stats()
	return st.DuplicateWrites, st.DuplicateExample
}
func (klaviyoView) name() string { return "klaviyo" }

// vendorSource is a CSV source whose sync writes to a vendor other than
// Brevo: it checks its records at that vendor's fake.
type vendorSource struct {
	*csvSource
	view vendorView
	dest string // the sync's destination line (YAML flow map)
}

func (s *vendorSource) destinationYAML() string { return s.dest }

func (s *vendorSource) yaml(pageSize int) string {
	attr := "firstname"
	if s.view.name() == "klaviyo" {
		attr = "first_name"
	}
	return fmt.Sprintf(`    source: {type: csv, path: %s, page_size: %d, identity: id}
    mapping: {email: email, attributes: {%s: first_name}}
`, filepath.Base(s.path), pageSize, attr)
}

// compare judges record w against the vendor's fake.
func (s *vendorSource) compare(v *valueCounts, w want) {
	v.Records++
	got, ok := s.view.first(w.Email)
	switch {
	case !ok:
		v.Lost++
	case got == w.First:
		v.Delivered++
	default:
		v.Wrong++
		if w.Flipped {
			v.WrongFlipped++
		}
		if len(v.Examples) < maxExamples {
			v.Examples = append(v.Examples, fmt.Sprintf("%s (%s): first name %q, want %q", w.Label, s.view.name(), got, w.First))
		}
	}
}

func (s *vendorSource) caughtUp(_ context.Context, _ *fakebrevo.Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.flipped {
		var v valueCounts
		if s.compare(&v, s.want(i)); v.Delivered != 1 {
			return false
		}
	}
	for s.verified < s.n {
		var v valueCounts
		if s.compare(&v, s.want(s.verified+1)); v.Delivered != 1 {
			return false
		}
		s.verified++
	}
	return true
}

func (s *vendorSource) check(_ context.Context, _ *fakebrevo.Server) valueCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	var v valueCounts
	for i := 1; i <= s.n; i++ {
		s.compare(&v, s.want(i))
	}
	return v
}

// vendorSyncs starts a fake HubSpot and a fake Klaviyo (each answering in
// 20-30 ms, Klaviyo's jobs taking a second) and returns one bulk sync's
// source for each, with rows rows.
func (e *env) vendorSyncs(idPrefix string, rows int) ([]*vendorSource, error) {
	hs := fakehubspot.New(fakehubspot.Options{Token: chaosHubSpotToken, RateLimit: -1, Latency: 20 * time.Millisecond})
	hsrv := httptest.NewServer(hs)
	e.onClose(hsrv.Close)
	kv := fakeklaviyo.New(fakeklaviyo.Options{APIKey: chaosKlaviyoKey, Validate: true, Latency: 30 * time.Millisecond, JobDelay: time.Second})
	ksrv := httptest.NewServer(kv)
	e.onClose(ksrv.Close)
	var out []*vendorSource
	hsrc, err := newCSVSource(e.dir, idPrefix+"-hubspot", "bulk", rows)
	if err != nil {
		return nil, err
	}
	hsrc.mapExt = false
	out = append(out, &vendorSource{csvSource: hsrc, view: hubspotView{hs},
		dest: fmt.Sprintf("{type: hubspot, base_url: %s, token: %s, mode: bulk, rate_limit: 1000}", hsrv.URL, chaosHubSpotToken)})
	ksrc, err := newCSVSource(e.dir, idPrefix+"-klaviyo", "bulk", rows)
	if err != nil {
		return nil, err
	}
	ksrc.mapExt = false
	out = append(out, &vendorSource{csvSource: ksrc, view: klaviyoView{kv},
		dest: fmt.Sprintf("{type: klaviyo, base_url: %s, api_key: %s, mode: bulk, list_id: Chaos1, rate_limit: 1000}", ksrv.URL, chaosKlaviyoKey)})
	return out, nil
}
