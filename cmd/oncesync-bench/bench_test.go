package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/source/file"
)

// TestMain lets the test binary play the bench's hidden subcommands: the
// bench re-executes os.Executable(), which is this binary under go test.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "baseline" || os.Args[1] == "inproc") {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// recorder is a Brevo stand-in that keeps every request body.
type recorder struct {
	mu     sync.Mutex
	bodies map[string][]string // path -> bodies in arrival order
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.bodies[r.URL.Path] = append(rc.bodies[r.URL.Path], string(b))
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/import") {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"processId": 1}`)
		return
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, `{"id": 1}`)
}

func newRecorder(t *testing.T) (*recorder, string) {
	t.Helper()
	rc := &recorder{bodies: map[string][]string{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv.URL + "/v3"
}

// oncesyncBodies sends csvPath through the real file source, mapping and
// Brevo destination, page by page, and returns what reached the server.
func oncesyncBodies(t *testing.T, csvPath, mode string, pageSize int) map[string][]string {
	t.Helper()
	rc, base := newRecorder(t)
	src, err := file.New(file.Params{Path: csvPath, Format: file.CSV})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := brevo.New(brevo.Params{BaseURL: base, APIKey: "k", Mode: mode, ListIDs: []int64{2}, RateLimit: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	spec := mapping.Spec{Email: "email", Attributes: map[string]string{"FIRSTNAME": "first_name", "LASTNAME": "last_name"}}
	ctx := context.Background()
	for cursor := ""; ; {
		page, err := src.ReadPage(ctx, cursor, pageSize)
		if err != nil {
			t.Fatal(err)
		}
		var recs []destination.Record
		for i, r := range page.Records {
			data, err := spec.Apply(r)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, destination.Record{Key: fmt.Sprintf("%s/%d", cursor, i), Data: data})
		}
		if len(recs) > 0 {
			if _, err := dst.Write(ctx, recs); err != nil {
				t.Fatal(err)
			}
		}
		if page.End {
			break
		}
		cursor = page.Next
	}
	return rc.bodies
}

// The baseline is only a fair yardstick if it sends what oncesync sends.
func TestBaselineBodiesMatchOncesync(t *testing.T) {
	t.Parallel()
	csvPath := filepath.Join(t.TempDir(), "contacts.csv")
	if err := writeContacts(csvPath, 7); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"bulk", "single"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			want := oncesyncBodies(t, csvPath, mode, 3)
			rc, base := newRecorder(t)
			res, err := runBaseline(context.Background(), baselineParams{
				CSV: csvPath, BaseURL: base, APIKey: "k", Mode: mode, PageSize: 3, ListIDs: []int64{2},
			})
			if err != nil {
				t.Fatal(err)
			}
			got := rc.bodies
			if mode == "single" { // concurrent calls: compare as sets
				for _, m := range []map[string][]string{want, got} {
					for _, b := range m {
						slices.Sort(b)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("baseline bodies differ from oncesync's:\n got %q\nwant %q", got, want)
			}
			wantReqs := map[string]int64{"bulk": 3, "single": 7}[mode]
			if res.Records != 7 || res.Requests != wantReqs {
				t.Errorf("baseline result = %+v, want 7 records in %d requests", res, wantReqs)
			}
		})
	}
}

func TestBaselineAgainstFake(t *testing.T) {
	t.Parallel()
	csvPath := filepath.Join(t.TempDir(), "contacts.csv")
	if err := writeContacts(csvPath, 1234); err != nil {
		t.Fatal(err)
	}
	fake := fakebrevo.New(fakebrevo.Options{APIKey: benchAPIKey, Validate: true})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	b := &bench{benchParams: benchParams{Records: 1234, PageSize: 100, Mode: "bulk"}, fake: fake}
	p := baselineParams{CSV: csvPath, BaseURL: srv.URL + "/v3", APIKey: benchAPIKey, Mode: "bulk", PageSize: 100, ListIDs: []int64{2}}

	res, err := runBaseline(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 1234 || res.Requests != 13 {
		t.Fatalf("baseline result = %+v, want 1234 records in 13 requests", res)
	}
	if err := b.checkFull(fake.Stats()); err != nil {
		t.Fatalf("after one pass: %v", err)
	}
	// A second pass without a reset writes everything again: the check must
	// catch it.
	if _, err := runBaseline(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	err = b.checkFull(fake.Stats())
	if err == nil || !strings.Contains(err.Error(), "duplicate_writes 1234") {
		t.Fatalf("after a duplicate pass, checkFull = %v, want duplicate_writes 1234 reported", err)
	}

	// A wrong API key fails the pass.
	p.APIKey = "wrong"
	if _, err := runBaseline(context.Background(), p); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("with a wrong key, runBaseline = %v, want HTTP 401", err)
	}
}

func TestCheckFull(t *testing.T) {
	t.Parallel()
	good := fakebrevo.Stats{Requests: 4, ContactsWritten: 1000, Contacts: 1000}
	tests := []struct {
		name  string
		mode  string
		edit  func(*fakebrevo.Stats)
		wants string // "" = no error
	}{
		{"good", "bulk", func(*fakebrevo.Stats) {}, ""},
		{"missing contacts", "bulk", func(s *fakebrevo.Stats) { s.Contacts = 999 }, "contacts 999, want 1000"},
		{"duplicates", "bulk", func(s *fakebrevo.Stats) { s.DuplicateWrites = 1 }, "duplicate_writes 1"},
		{"extra request", "bulk", func(s *fakebrevo.Stats) { s.Requests = 5 }, "requests 5, want 4"},
		{"single counts one request per record", "single", func(*fakebrevo.Stats) {}, "requests 4, want 1000"},
		{"refused", "bulk", func(s *fakebrevo.Stats) { s.Refused = 2 }, "refused 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := good
			tt.edit(&st)
			b := &bench{benchParams: benchParams{Records: 1000, PageSize: 250, Mode: tt.mode}}
			err := b.checkFull(st)
			switch {
			case tt.wants == "" && err != nil:
				t.Fatalf("checkFull = %v, want nil", err)
			case tt.wants != "" && (err == nil || !strings.Contains(err.Error(), tt.wants)):
				t.Fatalf("checkFull = %v, want an error containing %q", err, tt.wants)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 999.4: "999", 999.6: "1,000", 123456: "123,456", 1234567.2: "1,234,567"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSummary(t *testing.T) {
	t.Parallel()
	out := []byte("oncesync: 100 records\nrun 7 succeeded: read 200000, written 199990, replayed from ledger 10, rejected 0, in doubt 0 (settled 0), pages 400, duration 9s\n")
	s, err := parseSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.state != "succeeded" || s.read != 200000 || s.written != 199990 || s.replayed != 10 {
		t.Fatalf("parseSummary = %+v", s)
	}
	if _, err := parseSummary([]byte("failed: lease_lost: ...\n")); err == nil {
		t.Fatal("parseSummary accepted output without a summary")
	}
}

// TestBenchEndToEnd runs the whole bench on a small file with the real
// binary: both sides, the second pass and the profile.
func TestBenchEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the oncesync binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "oncesync")
	build := exec.Command("go", "build", "-o", bin, "github.com/oncesync/oncesync/cmd/oncesync")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, mode := range []string{"bulk", "single"} {
		t.Run(mode, func(t *testing.T) {
			prof := filepath.Join(dir, mode+".prof")
			var log bytes.Buffer
			rep, err := runBench(context.Background(), benchParams{
				Records: 300, PageSize: 100, Mode: mode, Runs: 1, Bin: bin, Dir: dir,
				Concurrency: 4, SecondPass: true, CPUProfile: prof,
			}, &log)
			if err != nil {
				t.Fatalf("runBench: %v\n%s", err, log.String())
			}
			if len(rep.Oncesync.Samples) != 1 || len(rep.Baseline.Samples) != 1 || rep.SecondPass == nil {
				t.Fatalf("report has %d/%d samples, second pass %v", len(rep.Oncesync.Samples), len(rep.Baseline.Samples), rep.SecondPass)
			}
			if rep.Oncesync.Median <= 0 || rep.Baseline.Median <= 0 || rep.Ratio <= 0 {
				t.Fatalf("report = %+v", rep)
			}
			if rep.SecondPassReqs != 0 || rep.DuplicateWrites != 0 {
				t.Fatalf("second pass sent %d requests, %d duplicates", rep.SecondPassReqs, rep.DuplicateWrites)
			}
			if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
				t.Fatalf("no CPU profile: %v", err)
			}
			var out bytes.Buffer
			printReport(&out, rep)
			if !strings.Contains(out.String(), mode+"  300") || !strings.Contains(out.String(), "requests sent 0") {
				t.Fatalf("report:\n%s", out.String())
			}
		})
	}
}
