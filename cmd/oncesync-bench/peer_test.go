package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCompareBodies(t *testing.T) {
	t.Parallel()
	const (
		a  = `{"jsonBody":[{"email":"a@example.com","attributes":{"FIRSTNAME":"Ada"}}],"listIds":[2],"updateExistingContacts":true}`
		aa = `{"listIds":[2],"jsonBody":[{"attributes":{"FIRSTNAME":"Ada"},"email":"a@example.com"}],"updateExistingContacts":true}` // a, keys reordered
		b  = `{"jsonBody":[{"email":"b@example.com","attributes":{"FIRSTNAME":"Bo"}}],"listIds":[2],"updateExistingContacts":true}`
		p  = "/v3/contacts/import"
	)
	req := func(body string) recorded {
		return recorded{Path: p, APIKey: benchAPIKey, ContentType: "application/json", Body: body}
	}
	want := []recorded{req(a), req(b)}
	tests := []struct {
		name     string
		got      []recorded
		byteSame bool
		wantErr  string // "" = no error
	}{
		{"identical", []recorded{req(a), req(b)}, true, ""},
		{"other order", []recorded{req(b), req(a)}, true, ""},
		{"keys reordered", []recorded{req(aa), req(b)}, false, ""},
		{"a value differs", []recorded{req(a), req(strings.Replace(b, "Bo", "Bob", 1))}, false, "a body differs"},
		{"listIds differ", []recorded{req(a), req(strings.Replace(b, "[2]", "[3]", 1))}, false, "a body differs"},
		{"one request missing", []recorded{req(a)}, false, "1 requests, want 2"},
		{"one request twice", []recorded{req(a), req(a)}, false, "a body differs"},
		{"not JSON", []recorded{req(a), req(`{"jsonBody":`)}, false, "not JSON"},
		{"wrong path", []recorded{req(a), {Path: "/v3/contacts", APIKey: benchAPIKey, ContentType: "application/json", Body: b}}, false, "a body differs"},
		{"no api key", []recorded{req(a), {Path: p, ContentType: "application/json", Body: b}}, false, "api-key"},
		{"not JSON content type", []recorded{req(a), {Path: p, APIKey: benchAPIKey, ContentType: "text/plain", Body: b}}, false, "Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			byteSame, err := compareBodies(want, tt.got)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("compareBodies = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("compareBodies = %v, want an error containing %q", err, tt.wantErr)
			case tt.wantErr == "" && byteSame != tt.byteSame:
				t.Fatalf("byteSame = %v, want %v", byteSame, tt.byteSame)
			}
		})
	}
}

func TestBenthosConfig(t *testing.T) {
	t.Parallel()
	cfg := benthosConfig("/data/my contacts.csv", "http://127.0.0.1:8026/v3/", 500)
	for _, want := range []string{
		`paths: ["/data/my contacts.csv"]`,
		"batch_count: 500",
		"format: json_array",
		`url: "http://127.0.0.1:8026/v3/contacts/import"`,
		"max_in_flight: 1",
		`api-key: "${` + apiKeyEnv + `}"`,
		"root.updateExistingContacts = true",
		"root.emptyContactsAttributes = true",
		"root.disableNotification = true",
		"root.listIds = [2]",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the Benthos config lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, benchAPIKey) {
		t.Error("the Benthos config holds the API key itself; it must come from the environment")
	}
}

// baselineTool is a stand-in peer for tests: the bench's own baseline (no
// checkpoint, like Benthos on a file: a restart sends everything again).
func baselineTool(t *testing.T) tool {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return tool{
		Name: "baseline",
		Argv: func(e passEnv) ([]string, error) {
			return []string{self, "baseline", "--csv", e.CSV, "--url", e.BaseURL, "--mode", "bulk",
				"--page-size", strconv.Itoa(e.PageSize), "--list-ids", "2"}, nil
		},
	}
}

// goBuild builds ./cmd/NAME into dir and returns the binary's path.
func goBuild(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", bin, "github.com/oncesync/oncesync/cmd/"+name)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return bin
}

// TestPeerAndRSSEndToEnd runs the peer bench with the real oncesync binary
// (the baseline standing in for Benthos) and the RSS bench on small files.
func TestPeerAndRSSEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the oncesync binary")
	}
	t.Parallel()
	dir := t.TempDir()
	bin := goBuild(t, dir, "oncesync")
	self := goBuild(t, dir, "oncesync-bench")

	t.Run("peer", func(t *testing.T) {
		var log bytes.Buffer
		rep, problems, err := runPeer(context.Background(), peerParams{
			Records: 1000, PageSize: 100, Runs: 1, KillAt: 0.4, Bin: bin, Self: self, Dir: dir,
		}, baselineTool(t), "test", &log)
		if err != nil {
			t.Fatalf("runPeer: %v\n%s", err, log.String())
		}
		if len(problems) > 0 {
			t.Fatalf("problems: %v\n%s", problems, log.String())
		}
		if !rep.BodiesSame || !rep.BodiesByteSame {
			t.Errorf("the baseline's bodies compared to itself: same %v, byte-same %v", rep.BodiesSame, rep.BodiesByteSame)
		}
		if rep.Oncesync.Median <= 0 || rep.Other.Median <= 0 || rep.Ratio <= 0 || len(rep.PairRatios) != 1 {
			t.Fatalf("throughput report = %+v", rep)
		}
		if rep.Oncesync.MaxRSSKiB <= 0 || rep.Other.MaxRSSKiB <= 0 {
			t.Errorf("peak RSS not measured: oncesync %d KiB, other %d KiB", rep.Oncesync.MaxRSSKiB, rep.Other.MaxRSSKiB)
		}
		if len(rep.Kill) != 2 {
			t.Fatalf("kill results = %+v, want oncesync and baseline", rep.Kill)
		}
		for _, k := range rep.Kill {
			// The kill lands after the write that takes the fake to 400 of
			// 1000 contacts: the 4th page of 100. oncesync has two imports
			// in flight, so the 5th page's may be applied by the time the
			// hook reads the count.
			if k.KilledAt < 400 || k.KilledAt > 500 || k.Lost != 0 || k.Contacts != 1000 {
				t.Errorf("%s: killed at %d, lost %d, contacts %d; want 400 to 500, 0, 1000", k.Tool, k.KilledAt, k.Lost, k.Contacts)
			}
		}
		if k := rep.Kill[0]; k.Tool != "oncesync" || k.Duplicates != 0 || !strings.Contains(k.RestartLine, "succeeded") {
			t.Errorf("oncesync after kill -9: %+v, want 0 duplicates and a succeeded restart", k)
		}
		// No checkpoint: the restart sends the 400 contacts again.
		if k := rep.Kill[1]; k.Tool != "baseline" || k.Duplicates != 400 || k.ContactsWritten != 1400 {
			t.Errorf("baseline after kill -9: %+v, want 400 duplicates of 1,400 writes", k)
		}
		var out bytes.Buffer
		printPeer(&out, rep)
		for _, want := range []string{"RATIO oncesync/baseline", "byte-for-byte", "DUPLICATE_WRITES", "oncesync restart: run "} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("report lacks %q:\n%s", want, out.String())
			}
		}
	})

	t.Run("rss", func(t *testing.T) {
		var log bytes.Buffer
		rep, err := runRSS(context.Background(), rssParams{Records: []int{300, 1200}, PageSize: 100, Bin: bin, Self: self, Dir: dir}, &log)
		if err != nil {
			t.Fatalf("runRSS: %v\n%s", err, log.String())
		}
		if len(rep.Rows) != 2 || rep.Rows[0].Records != 300 || rep.Rows[1].Records != 1200 {
			t.Fatalf("rows = %+v", rep.Rows)
		}
		for _, r := range rep.Rows {
			if r.MaxRSSKiB <= 1024 || r.CSVBytes <= 0 || r.RecordsPerSec <= 0 || r.Duplicates != 0 {
				t.Errorf("row = %+v, want a peak RSS above 1 MiB, a CSV size, a rate and 0 duplicates", r)
			}
		}
		var out bytes.Buffer
		printRSS(&out, rep)
		if !strings.Contains(out.String(), "1,200") || !strings.Contains(out.String(), "goal: peak RSS < 150 MiB") {
			t.Errorf("report:\n%s", out.String())
		}
	})
}

// TestBenthosBodies checks the generated Benthos config against a real
// Benthos binary when ONCESYNC_BENCH_BENTHOS names one (scripts/bench-peer.sh
// builds bin/benthos-v4.60.0); the bench itself runs the same check first.
func TestBenthosBodies(t *testing.T) {
	bin := os.Getenv("ONCESYNC_BENCH_BENTHOS")
	if bin == "" {
		t.Skip("ONCESYNC_BENCH_BENTHOS is not set")
	}
	t.Parallel()
	same, _, err := checkBodies(context.Background(), benthosTool(bin), t.TempDir())
	if err != nil || !same {
		t.Fatalf("checkBodies = %v, %v; want the baseline's JSON", same, err)
	}
}
