package shopify_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/fakeshopify"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/shopify"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
)

// t0 is every suite customer's creation and update: they all tie, so the
// UPDATED_AT order is broken by id and pages cut through the tie.
var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// shops serves one fake shop per record set on one address, chosen by the
// access token (the hash of the records): sources over the same records
// see the same data and have the same ID, as a new process would.
type shops struct {
	mu    sync.Mutex
	fakes map[string]*fakeshopify.Server
	srv   *httptest.Server
}

func newShops(t *testing.T) *shops {
	s := &shops{fakes: map[string]*fakeshopify.Server{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		f := s.fakes[r.Header.Get("X-Shopify-Access-Token")]
		s.mu.Unlock()
		if f == nil {
			http.Error(w, `{"errors":"[API] Invalid API key or access token (unrecognized login or wrong password)"}`, http.StatusUnauthorized)
			return
		}
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// shop returns the token of a shop holding recs (id, email, name as
// firstName, note).
func (s *shops) shop(t *testing.T, recs []map[string]string) string {
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	token := fmt.Sprintf("shpat_%x", sha256.Sum256(b))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fakes[token] == nil {
		// A large bucket: the suite reads thousands of ids; the throttle
		// has its own tests.
		// A stopped clock: a pass's cursor holds the Date of the answer to
		// its first page, so a real clock made two reads of one cursor
		// differ when a second ticked between them.
		f := fakeshopify.New(fakeshopify.Options{Token: token, BucketSize: 1_000_000, RestoreRate: 1_000_000,
			Clock: clock.NewFake(t0.Add(96 * time.Hour))})
		cs := make([]fakeshopify.Customer, len(recs))
		for i, r := range recs {
			id, err := strconv.ParseInt(r["id"], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			cs[i] = fakeshopify.Customer{ID: id, Email: r["email"], FirstName: r["name"], Note: r["note"], CreatedAt: t0, UpdatedAt: t0}
		}
		f.Put(cs...)
		s.fakes[token] = f
	}
	return token
}

// suiteSource shows the suite's columns: id, email, name (firstName) and
// note, a null as "" (the suite's records have no nulls; Shopify returns
// an empty name as null).
type suiteSource struct{ *shopify.Source }

func project(recs []source.Record) []source.Record {
	out := make([]source.Record, len(recs))
	for i, r := range recs {
		str := func(k string) any {
			if v := r.Fields[k]; v != nil {
				return v
			}
			return ""
		}
		out[i] = source.Record{Fields: map[string]any{"id": r.Fields["id"], "email": str("email"), "name": str("firstName"), "note": str("note")}}
	}
	return out
}

func (s suiteSource) ReadPage(ctx context.Context, cursor string, size int) (source.Page, error) {
	p, err := s.Source.ReadPage(ctx, cursor, size)
	p.Records = project(p.Records)
	return p, err
}

func (s suiteSource) ReadIdentities(ctx context.Context, identity string, ids []string) ([]source.Record, error) {
	recs, err := s.Source.ReadIdentities(ctx, identity, ids)
	return project(recs), err
}

func TestSuite(t *testing.T) {
	s := newShops(t)
	sourcetest.Run(t, sourcetest.Harness{New: func(t *testing.T, recs []map[string]string) source.Source {
		src, err := shopify.New(shopify.Params{ShopURL: s.srv.URL, Token: s.shop(t, recs)})
		if err != nil {
			t.Fatal(err)
		}
		return suiteSource{src}
	}})
}
