// Package example is the smallest complete destination connector, kept as
// the model for new ones and registered only by its own tests: it stores
// each record with `PUT <url>/records/<delivery key>` and a bearer token.
// A PUT by key is idempotent, so an in-doubt record is simply sent again
// (CapIdempotent). Everything HTTP (retries, Retry-After, no redirects,
// the attempt deadline, secret-free errors) is internal/apiclient's; its
// keys, checks and secrets are config.go's.
package example

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Params configure a Destination.
type Params struct {
	URL         string // the store's root, absolute http(s)
	Token       string // sent as "Authorization: Bearer <token>"
	Concurrency int    // PUTs in flight (default 4)
	Timeout     time.Duration
	HTTPClient  *http.Client
	Clock       clock.Clock
	Sleep       func(ctx context.Context, d time.Duration) error
	MaxRetries  int
}

// Destination writes records to the store. It is safe for concurrent use.
type Destination struct {
	root string
	host string
	tok  string
	conc int
	api  *apiclient.Client
}

var _ destination.Destination = (*Destination)(nil)

// New returns a Destination; bad parameters are invalid_sync_definition.
func New(p Params) (*Destination, error) {
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "example url must be an absolute http(s) URL")
	}
	if p.Token == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "example token is empty")
	}
	conc := p.Concurrency
	if conc <= 0 {
		conc = 4
	}
	return &Destination{
		root: strings.TrimRight(p.URL, "/"), host: u.Host, tok: p.Token, conc: conc,
		api: apiclient.New(apiclient.Params{
			Name: "example", Client: p.HTTPClient, Timeout: p.Timeout, MaxRetries: p.MaxRetries,
			Clock: p.Clock, Sleep: p.Sleep, Secrets: []string{p.Token},
		}),
	}, nil
}

// Capability: a record sent again under its key overwrites itself.
func (d *Destination) Capability() destination.Capability { return destination.CapIdempotent }

// Verify is not offered: in-doubt records are resent.
func (d *Destination) Verify(context.Context, []destination.Record, time.Time) (map[string]string, error) {
	return nil, errors.New("example: verify is not supported; records are resent by key")
}

// Close releases idle connections.
func (d *Destination) Close() error { d.api.CloseIdleConnections(); return nil }

// Write PUTs each record and returns one result per record settled; on a
// failure, the records provably never sent are NotSent and the others are
// left out (in doubt).
func (d *Destination) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	if err := ctx.Err(); err != nil {
		out := make([]destination.Result, len(recs))
		for i, r := range recs {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
		}
		return out, failure.Wrap(failure.DestinationUnavailable, fmt.Errorf("%w: %w", destination.ErrNotSent, err),
			"example request interrupted")
	}
	out, err := apiclient.WriteEach(ctx, recs, d.conc, nil, func(ctx context.Context, r destination.Record) (destination.Result, error) {
		body, err := json.Marshal(r.Data)
		if err != nil {
			return destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: "record data cannot be encoded as JSON"}, nil
		}
		h := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + d.tok}}
		res, err := d.api.Do(ctx, apiclient.Request{
			Method: http.MethodPut, URL: d.root + "/records/" + url.PathEscape(r.Key),
			Route: "PUT /records/{key}", Header: h, Body: body, Idempotent: true,
		})
		if err != nil {
			return destination.Result{}, err
		}
		if res.Status >= 200 && res.Status < 300 {
			return destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: r.Key[:min(12, len(r.Key))]}, nil
		}
		return destination.Result{Key: r.Key, Outcome: destination.Rejected,
			Message: fmt.Sprintf("HTTP %d: %.200s", res.Status, strings.TrimSpace(string(res.Body)))}, nil
	})
	if err != nil && failure.CodeOf(err) == failure.Internal {
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		err = failure.Wrap(failure.DestinationUnavailable, err, "example request interrupted")
	}
	return out, err
}
