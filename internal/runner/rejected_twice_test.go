package runner

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/source"
)

// lookbackSource is a keyset source whose cursor, at the end, goes back
// over the rows it read (as a PostgreSQL source's cursor_lookback does):
// the next run reads them again.
type lookbackSource struct{ *keysetSource }

func (s lookbackSource) ReadPage(ctx context.Context, cursor string, size int) (source.Page, error) {
	p, err := s.keysetSource.ReadPage(ctx, cursor, size)
	if p.End {
		p.Next = ""
	}
	return p, err
}

// TestRejectedReadTwiceInOneRun: a refused row is read again by identity
// and, when the cursor's lookback covers it, read again by the cursor in
// the same run. It is sent and counted once (a live serve's run showed
// "rejected 4" for 2 refused records, each sent twice to Brevo).
func TestRejectedReadTwiceInOneRun(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	src := lookbackSource{&keysetSource{rows: map[int]string{}}}
	for i := 1; i <= 100; i++ {
		src.rows[i] = fmt.Sprintf("N%d", i)
	}
	tb.dest.reject = func(r destination.Record) bool { return r.Data["email"] == email(7) }
	params := func() Params {
		p := tb.params(t, "id")
		p.Source = src
		return p
	}
	r, err := Run(context.Background(), params())
	if err != nil || r.Written != 99 || r.Rejected != 1 {
		t.Fatalf("first run: %v %+v", err, r)
	}
	r, err = Run(context.Background(), params())
	if err != nil {
		t.Fatal(err)
	}
	if r.Rejected != 1 || r.Written != 0 || r.Requests != 1 {
		t.Errorf("second run: rejected %d, written %d, requests %d; want the refused row sent once and counted once", r.Rejected, r.Written, r.Requests)
	}
}

// TestRejectedReadAgainIsNotInfo: every run of a sync with a refused record
// reads it again; that is no news at info level, where it repeated on every
// tick (a soak's sync @every 10s with 24 refused rows logged "reading
// rejected records again" 172 times in 20 minutes).
func TestRejectedReadAgainIsNotInfo(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	src := &keysetSource{rows: map[int]string{}}
	for i := 1; i <= 10; i++ {
		src.rows[i] = fmt.Sprintf("N%d", i)
	}
	tb.dest.reject = func(r destination.Record) bool { return r.Data["email"] == email(7) }
	var logs strings.Builder
	for range 3 {
		p := tb.params(t, "id")
		p.Source = src
		p.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		if _, err := Run(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "reading rejected records again"); n != 0 {
		t.Fatalf("%d info lines about reading the refused record again over 3 runs, want none:\n%s", n, logs.String())
	}
}
