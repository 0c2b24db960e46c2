package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// watchRSS follows a running process's peak resident set (VmHWM, in MB)
// until it ends. Its rusage would not do: Go starts children with vfork,
// and Linux folds the parent's (this test's) peak into the child's
// ru_maxrss at exec (see cmd/oncesync-bench/rss.go).
func watchRSS(p *proc) func() int64 {
	var peak atomic.Int64
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		path := fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid)
		for {
			if b, err := os.ReadFile(path); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						var kb int64
						fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
						peak.Store(max(peak.Load(), kb>>10))
					}
				}
			}
			select {
			case <-p.Done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int64 { <-stopped; return peak.Load() }
}

// TestHugeRecordRefused: a JSONL file with one 40 MB line fails the run
// with source_query_invalid naming the line, the records before it
// delivered, and the process's peak RSS within a few MB of the same run
// over the file without the line (before the limit, reading it cost the
// run 483 MB).
func TestHugeRecordRefused(t *testing.T) {
	t.Parallel()
	var baseline int64
	t.Run("without the line", func(t *testing.T) {
		tb := setup(t, setupParams{records: 101, pageSize: 50, mode: "bulk"})
		p := tb.startRun()
		rss := watchRSS(p)
		if code := p.Wait(t, 2*time.Minute); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.Out)
		}
		baseline = rss()
	})
	tb := setup(t, setupParams{mode: "bulk"})
	path := filepath.Join(tb.dir, "events.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(w, "{\"id\":%d,\"email\":\"person%06d@example.com\",\"first_name\":\"First%d\"}\n", i, i, i)
		tb.emails = append(tb.emails, fmt.Sprintf("person%06d@example.com", i))
	}
	w.WriteString("{\"id\":101,\"email\":\"person000101@example.com\",\"first_name\":\"")
	chunk := strings.Repeat("x", 1<<16)
	for range (40 << 20) / len(chunk) {
		w.WriteString(chunk)
	}
	w.WriteString("\"}\n{\"id\":102,\"email\":\"person000102@example.com\",\"first_name\":\"After\"}\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
syncs:
  - id: contacts
    workspace: acme
    source: {type: jsonl, path: events.jsonl, page_size: 50, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`, tb.srv.URL)
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := tb.startRun()
	peak := watchRSS(p)
	if code := p.Wait(t, 2*time.Minute); code == 0 {
		t.Fatalf("the run succeeded past a 40 MB record:\n%s", p.Out)
	}
	out := p.Out.String()
	if !strings.Contains(out, "source_query_invalid") || !strings.Contains(out, "line 101") || !strings.Contains(out, "max_record_bytes") {
		t.Fatalf("want source_query_invalid naming line 101 and max_record_bytes:\n%s", out)
	}
	if strings.Contains(out, "xxxxxxxx") {
		t.Fatal("the output quotes the record")
	}
	tb.checkDelivered(t)
	rss := peak()
	t.Logf("peak RSS %d MB refusing a 40 MB line, %d MB for the same run without it", rss, baseline)
	// The limit is 1 MiB; the line alone is 40 MB.
	if baseline == 0 || rss > baseline+20 {
		t.Fatalf("peak RSS %d MB refusing a 40 MB line, %d MB without it; want within 20 MB", rss, baseline)
	}
}
