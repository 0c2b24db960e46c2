package runner

import (
	"context"
	"fmt"
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
