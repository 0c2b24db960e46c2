// Package demo tells oncesync's whole story on embedded defaults: a temp
// SQLite store, the built-in fake Brevo, generated contacts, a worker killed
// with SIGKILL in the worst possible place (after Brevo applied a write,
// before the worker heard back), the recovery, and a summary measured at the
// destination.
package demo

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/progress"
)

// Params configure the demo.
type Params struct {
	// Executable is the oncesync binary the workers run (os.Executable()).
	Executable string
	Records    int
	PageSize   int
	Mode       string // bulk | single
	// KillAtWrite is the destination write (1-based) after which the first
	// worker is killed, before it receives the response.
	KillAtWrite int
	// Dir is where the store, CSV and config go ("" = a temp dir, removed after).
	Dir    string
	Stdout io.Writer
}

// Result is what the demo measured.
type Result struct {
	Records         int
	Contacts        int64
	ContactsWritten int64
	Duplicates      int64
	Requests        int64
	SecondPassReqs  int64
	Recovery        time.Duration
	Settled         string
}

// killAt is the write after which the demo kills the first worker: the
// seventh import of the bulk path (fewer when the source has fewer pages:
// the middle one), a third of the way through the single path; never
// past the last write, or the worker would finish before its kill.
func killAt(mode string, records, pageSize int) int {
	if mode == "single" {
		return max(records/3, 1)
	}
	pages := (records + pageSize - 1) / pageSize
	return max(min(7, (pages+1)/2), 1)
}

// Run plays the demo. It returns an error when the promise did not hold.
func Run(ctx context.Context, p Params) (Result, error) {
	if p.Records <= 0 {
		p.Records = 5000
	}
	if p.PageSize <= 0 {
		p.PageSize = 250
	}
	if p.Mode == "" {
		p.Mode = "bulk"
	}
	if p.KillAtWrite <= 0 {
		p.KillAtWrite = killAt(p.Mode, p.Records, p.PageSize)
	}
	if err := p.Check(); err != nil {
		return Result{}, err
	}
	out := p.Stdout
	dir, kept := p.Dir, p.Dir != ""
	if kept {
		// The config written into dir names its files relative to itself:
		// a relative dir was doubled (dir/dir/oncesync.db).
		abs, err := filepath.Abs(dir)
		if err != nil {
			return Result{}, fmt.Errorf("the demo's directory: %w", err)
		}
		dir = abs
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "oncesync-demo-*")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("the demo's directory: %w", err)
	}

	// 1. Contacts.
	csvPath := filepath.Join(dir, "contacts.csv")
	if err := writeContacts(csvPath, p.Records); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(out, "1. generated %d contacts in %s\n", p.Records, csvPath)

	// 2. Fake Brevo, with a trap: after write number KillAtWrite is applied,
	// the worker is killed before it hears back.
	var (
		mu     sync.Mutex
		writes int
		victim *os.Process
		rec    recoveryTimer
	)
	fb := fakebrevo.New(fakebrevo.Options{
		APIKey:   "demo-key",
		Validate: true,
		AfterWrite: func(r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			writes++
			if writes == p.KillAtWrite && victim != nil {
				_ = victim.Signal(syscall.SIGKILL)
				rec.killedAt = time.Now()
				victim = nil
				return
			}
			rec.write(arrivedAt(r), time.Now())
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	srv := &http.Server{Handler: stampArrival(fb), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String() + "/v3"
	fmt.Fprintf(out, "2. fake Brevo on %s (validating every request against Brevo's API spec)\n", base)

	// 3. Config.
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	cfg := fmt.Sprintf(`store: sqlite://%s
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: demo-contacts
    workspace: demo
    schedule: "*/15 * * * *"
    source: {type: csv, path: %s, page_size: %d, identity: id}
    destination: {type: brevo, base_url: %s, api_key: ${DEMO_BREVO_KEY}, mode: %s, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, filepath.Join(dir, "oncesync.db"), csvPath, p.PageSize, base, p.Mode)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(out, "3. sync demo-contacts: csv -> brevo (%s path, pages of %d), store %s\n", p.Mode, p.PageSize, filepath.Join(dir, "oncesync.db"))

	// 4. First worker: killed at write KillAtWrite.
	fmt.Fprintf(out, "4. worker 1 starts; it will be killed with SIGKILL right after Brevo applies write #%d\n", p.KillAtWrite)
	bar := progress.New(out, int64(p.Records), "   delivered", time.Second)
	var resumed atomic.Bool // worker 2 started
	bar.Set(0, "")
	stopBar := make(chan struct{})
	barDone := make(chan struct{})
	go func() {
		defer close(barDone)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		var (
			last    int64
			changed = time.Now()
			said    string
		)
		for {
			select {
			case <-stopBar:
				return
			case now := <-t.C:
				// Only changes: while worker 2 settles what worker 1 left in
				// doubt (an import Brevo may not show yet is read back after
				// settings.in_doubt_grace), a line a second saying the same
				// would be noise; one line says why nothing moves.
				n := fb.Stats().Contacts
				moved := n != last
				if moved {
					last, changed = n, now
				}
				say := ""
				if resumed.Load() && now.Sub(changed) >= 2*time.Second {
					say = "(worker 2 is settling what worker 1 left in doubt before it sends more)"
				}
				if moved || say != said {
					said = say
					bar.Set(n, say)
				}
			}
		}
	}()

	first, err := start(ctx, p.Executable, cfgPath, dir, "worker-1.log")
	if err != nil {
		return Result{}, err
	}
	mu.Lock()
	victim = first.Process
	mu.Unlock()
	firstErr := first.Wait()
	mu.Lock()
	killed := !rec.killedAt.IsZero()
	mu.Unlock()
	if !killed {
		close(stopBar)
		<-barDone
		if firstErr == nil {
			return Result{}, fmt.Errorf("worker 1 finished the sync before its kill point, write #%d: %s", p.KillAtWrite, workerLog(dir, "worker-1.log", kept))
		}
		return Result{}, fmt.Errorf("worker 1 ended before its kill point (%v): %s", firstErr, workerLog(dir, "worker-1.log", kept))
	}

	// 5. Second worker: resumes from the checkpoint, settles the in-doubt page.
	fmt.Fprintf(out, "\n5. worker 1 killed mid-batch, with %d contacts applied at Brevo; worker 2 starts at once\n", fb.Stats().Contacts)
	mu.Lock()
	rec.secondAt = time.Now()
	mu.Unlock()
	resumed.Store(true)
	second, err := start(ctx, p.Executable, cfgPath, dir, "worker-2.log")
	if err != nil {
		return Result{}, err
	}
	if err := second.Wait(); err != nil {
		close(stopBar)
		<-barDone
		return Result{}, fmt.Errorf("worker 2 failed (%v): %s", err, workerLog(dir, "worker-2.log", kept))
	}
	close(stopBar)
	<-barDone
	bar.Set(fb.Stats().Contacts, "")
	bar.Finish()
	afterRecovery := fb.Stats()

	// 6. The next scheduled run: everything is in the ledger, nothing is sent.
	third, err := start(ctx, p.Executable, cfgPath, dir, "worker-3.log")
	if err != nil {
		return Result{}, err
	}
	if err := third.Wait(); err != nil {
		return Result{}, fmt.Errorf("the second pass failed (%v): %s", err, workerLog(dir, "worker-3.log", kept))
	}
	final := fb.Stats()
	fmt.Fprintf(out, "6. the next scheduled run re-read all %d contacts and sent %d requests (all replayed from the ledger)\n",
		p.Records, final.Requests-afterRecovery.Requests)

	mu.Lock()
	recovery := rec.recovery()
	mu.Unlock()
	res := Result{
		Records:         p.Records,
		Contacts:        final.Contacts,
		ContactsWritten: final.ContactsWritten,
		Duplicates:      final.DuplicateWrites,
		Requests:        final.Requests,
		SecondPassReqs:  final.Requests - afterRecovery.Requests,
		Recovery:        recovery,
		Settled:         lastLine(filepath.Join(dir, "worker-2.log")),
	}
	fmt.Fprintf(out, "\nworker 2: %s\n", res.Settled)
	fmt.Fprintln(out, "\nsummary (measured at the destination, GET /_stats):")
	fmt.Fprintf(out, "  records in source:       %d\n", res.Records)
	fmt.Fprintf(out, "  contacts at destination: %d\n", res.Contacts)
	fmt.Fprintf(out, "  destination writes:      %d\n", res.ContactsWritten)
	fmt.Fprintf(out, "  duplicates:              %d\n", res.Duplicates)
	fmt.Fprintf(out, "  in doubt:                %s\n", InDoubtSummary(res.Settled))
	if recovery > 0 {
		fmt.Fprintf(out, "  recovery time:           %s (kill -9 to the next write by the resumed worker)\n", recovery.Round(time.Millisecond))
	} else {
		fmt.Fprintln(out, "  recovery time:           none to measure: the resumed worker had nothing left to write")
	}
	if res.Duplicates != 0 || res.Contacts != int64(p.Records) || res.ContactsWritten != int64(p.Records) || res.SecondPassReqs != 0 {
		return res, errors.New("the promise did not hold: see the summary above")
	}
	return res, nil
}

// Writes is how many destination writes the demo's sync makes: one import
// a page on the bulk path, one call a contact on the single path.
func Writes(mode string, records, pageSize int) int {
	if mode == "single" {
		return records
	}
	return (records + pageSize - 1) / pageSize
}

// Check refuses what the demo cannot play, once Run has given the zero
// values their defaults.
func (p Params) Check() error {
	switch {
	case p.Records < 1 || p.PageSize < 1 || p.KillAtWrite < 0:
		return fmt.Errorf("--records and --page-size must be at least 1, --kill-at-write at least 0 (0: a write in the middle)")
	case p.Mode != "bulk" && p.Mode != "single":
		return fmt.Errorf("--mode %q: the demo's Brevo paths are bulk and single", p.Mode)
	case p.KillAtWrite > Writes(p.Mode, p.Records, p.PageSize):
		return fmt.Errorf("--kill-at-write %d is past the demo's last write: %d contacts make %d writes on the %s path (pages of %d)",
			p.KillAtWrite, p.Records, Writes(p.Mode, p.Records, p.PageSize), p.Mode, p.PageSize)
	}
	return nil
}

// workerLog points at a worker's log in a directory the demo keeps, and
// quotes the end of it from one it removes as it returns.
func workerLog(dir, name string, kept bool) string {
	path := filepath.Join(dir, name)
	if kept {
		return "see " + path
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "its log could not be read (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "the end of its log (the demo's directory is removed; keep it with --dir):\n  " + strings.Join(lines, "\n  ")
}

func start(ctx context.Context, exe, cfg, dir, logName string) (*exec.Cmd, error) {
	logf, err := os.Create(filepath.Join(dir, logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "run", "--config", cfg, "demo-contacts", "--log-level", "info")
	cmd.Env = append(os.Environ(), "DEMO_BREVO_KEY=demo-key")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	return cmd, nil
}

func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); len(l) > 4 && l[:4] == "run " {
			last = l
		}
	}
	return last
}

func writeContacts(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "email", "first_name", "last_name"})
	first := []string{"Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Leslie"}
	last := []string{"Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Lamport"}
	for i := 1; i <= n; i++ {
		_ = w.Write([]string{strconv.Itoa(i), fmt.Sprintf("contact%06d@example.com", i), first[i%10], last[(i/10)%10]})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// recoveryTimer measures the demo's recovery: from the kill to the first
// write the resumed worker made. On the bulk path two imports are in flight,
// so a write the killed worker had already sent can still be applied after
// the kill; it arrived before the second worker started, and does not count.
type recoveryTimer struct {
	killedAt time.Time // worker 1 killed
	secondAt time.Time // worker 2 started
	resumeAt time.Time // the first write worker 2 sent was applied
}

// write records a write applied at applied, whose request arrived at arrived.
func (t *recoveryTimer) write(arrived, applied time.Time) {
	if t.resumeAt.IsZero() && !t.secondAt.IsZero() && arrived.After(t.secondAt) {
		t.resumeAt = applied
	}
}

// recovery is the time from the kill to the resumed worker's first write
// (0 when either did not happen).
func (t *recoveryTimer) recovery() time.Duration {
	if t.killedAt.IsZero() || t.resumeAt.IsZero() {
		return 0
	}
	return t.resumeAt.Sub(t.killedAt)
}

// inDoubtRe reads the in-doubt figures of worker 2's summary line
// (cli's inDoubtPhrase: cli's TestDemoReadsRunSummary fails if the two part).
var inDoubtRe = regexp.MustCompile(`in doubt (\d+) \((\d+) found already delivered, (\d+) `)

// InDoubtSummary is the summary's in-doubt line, from worker 2's run line
// (exported for cli's test of the line it prints).
func InDoubtSummary(runLine string) string {
	if strings.Contains(runLine, "in doubt 0,") {
		return "none"
	}
	m := inDoubtRe.FindStringSubmatch(runLine)
	if m == nil {
		return "see worker 2's line above"
	}
	return fmt.Sprintf("%s records; %s found at Brevo by reading it back (not written again), %s not there (written once)", m[1], m[2], m[3])
}

type arrivalKey struct{}

// stampArrival records in each request's context when it reached the fake.
func stampArrival(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), arrivalKey{}, time.Now())))
	})
}

// arrivedAt is when r reached the fake (stampArrival), or the zero time.
func arrivedAt(r *http.Request) time.Time {
	t, _ := r.Context().Value(arrivalKey{}).(time.Time)
	return t
}
