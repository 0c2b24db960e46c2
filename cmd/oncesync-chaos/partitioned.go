package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

// Partitioned syncs (docs/guide.md#the-checkpoint-barrier) on real processes: one sync with
// `partitions: N` over a PostgreSQL table, one `serve` (it leads: River's
// retries and the recovery sweep need a leader, and its API is how a person
// says "run now") and `worker` processes on a PostgreSQL store, with the
// leases and the checkpoint barrier in Redis. The scenario redis-partitioned
// kills that Redis mid-run; the tests in partitioned_test.go also run the
// plain delivery and a source changed mid-run (acceptance 3 and 5 of the
// partitioned sync).

// partitionedParams configure a partitioned deployment.
type partitionedParams struct {
	Rows       int // rows of the source table
	Partitions int // partitions: N
	PageSize   int
	Workers    int // worker processes besides serve (default 2)
	Slots      int // --workers of each worker process (default 2)
	ServeSlots int // --workers of serve (default 1)
	// Settings is the YAML flow map of the config's settings (default a
	// 5 s lease renewed every 2 s).
	Settings string
	// RetryBackoff is --retry-backoff of every process (default 1 s).
	RetryBackoff time.Duration
	// RedisURL is where the leases and the barrier live (default --redis-url).
	RedisURL string
	Fake     fakebrevo.Options
	// RunLimit bounds the wait for the partitioned run to end (default 3 min).
	RunLimit time.Duration
}

// partitioned is a running partitioned deployment.
type partitioned struct {
	p      partitionedParams
	dest   *dest
	syncID string
	config string
	dbURL  string
	src    *pgx.Conn // the source table's connection (setup and checks)
	table  string    // the source table, quoted
	st     store.Store
	rdb    *redis.Client
	procs  []*proc // serve, then the workers
	api    string  // serve's base URL
	token  string  // an API token of the config

	mu     sync.Mutex
	writes []time.Time // arrival of every write the fake applied
	hook   func()      // called after each applied write, before its answer
}

// partitionEmail is row i's e-mail address; partitionFirstName its FIRSTNAME.
func partitionEmail(i int) string     { return fmt.Sprintf("pt%07d@example.com", i) }
func partitionFirstName(i int) string { return "F" + strconv.Itoa(i) }

// newPartitioned creates a database holding the store and the source table
// (Rows rows), starts the fake, serve and the workers, and waits until every
// process is up. It starts no run (runNow does).
func (e *env) newPartitioned(ctx context.Context, p partitionedParams) (*partitioned, error) {
	if p.Workers == 0 {
		p.Workers = 2
	}
	if p.Slots == 0 {
		p.Slots = 2
	}
	if p.ServeSlots == 0 {
		p.ServeSlots = 1
	}
	if p.Settings == "" {
		p.Settings = "{lease_ttl: 5s, lease_renew: 2s}"
	}
	if p.RetryBackoff == 0 {
		p.RetryBackoff = time.Second
	}
	if p.RedisURL == "" {
		p.RedisURL = e.o.RedisURL
	}
	if p.RunLimit == 0 {
		p.RunLimit = 3 * time.Minute
	}
	dbURL, err := e.createDatabase(ctx, e.o.DBURL)
	if err != nil {
		return nil, err
	}
	c := &partitioned{p: p, dbURL: dbURL, table: pgx.Identifier{"src", "contacts"}.Sanitize()}
	if c.src, err = pgx.Connect(ctx, dbURL); err != nil {
		return nil, err
	}
	e.onClose(func() { _ = c.src.Close(context.Background()) })
	start := time.Now()
	if _, err := c.src.Exec(ctx, `CREATE SCHEMA src; CREATE TABLE `+c.table+` (id bigint PRIMARY KEY, email text NOT NULL,
		first_name text NOT NULL, updated_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return nil, fmt.Errorf("create the source table: %w", err)
	}
	if _, err := c.src.CopyFrom(ctx, pgx.Identifier{"src", "contacts"}, []string{"id", "email", "first_name"},
		pgx.CopyFromSlice(p.Rows, func(i int) ([]any, error) {
			return []any{int64(i + 1), partitionEmail(i + 1), partitionFirstName(i + 1)}, nil
		})); err != nil {
		return nil, fmt.Errorf("fill the source table: %w", err)
	}
	e.vlogf("source table filled with %d rows in %s", p.Rows, time.Since(start).Round(time.Millisecond))

	c.dest, err = e.newDest(p.Fake)
	if err != nil {
		return nil, err
	}
	c.dest.setAfterWrite(func(string) {
		c.mu.Lock()
		c.writes = append(c.writes, time.Now())
		hook := c.hook
		c.mu.Unlock()
		if hook != nil {
			hook()
		}
	})
	var tag, tok [4]byte
	_, _ = rand.Read(tag[:])
	_, _ = rand.Read(tok[:])
	c.syncID = "part-" + hex.EncodeToString(tag[:])
	c.token = "chaos-token-" + hex.EncodeToString(tok[:])
	cfg := fmt.Sprintf(`store: %s
redis: %s
settings: %s
web: {api_tokens: [%s]}
syncs:
  - id: %s
    workspace: chaos
    partitions: %d
    source: {type: postgres, dsn: %q, table: src.contacts, cursor_column: updated_at, identity: id, page_size: %d}
    destination: {type: brevo, base_url: %s, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`, dbURL, p.RedisURL, p.Settings, c.token, c.syncID, p.Partitions, dbURL, p.PageSize, c.dest.URL(c.syncID))
	c.config = filepath.Join(e.dir, "oncesync.yaml")
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if c.st, err = app.OpenStore(ctx, &config.Config{Store: dbURL}, clock.Real{}); err != nil {
		return nil, err
	}
	e.onClose(func() { _ = c.st.Close() })
	opts, err := redis.ParseURL(p.RedisURL)
	if err != nil {
		return nil, err
	}
	opts.MaxRetries, opts.DialTimeout = 0, time.Second
	c.rdb = redis.NewClient(opts)
	e.onClose(func() { _ = c.rdb.Close() })

	backoff := p.RetryBackoff.String()
	// serve first: it applies the migrations the workers rely on.
	serve, err := e.oncesync("serve", "serve", "--config", c.config, "--listen", "127.0.0.1:0",
		"--workers", strconv.Itoa(p.ServeSlots), "--retry-backoff", backoff, "--log-level", "info")
	if err != nil {
		return nil, err
	}
	line, err := startLine(ctx, serve)
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`http://(\S+) \(`).FindStringSubmatch(line)
	if m == nil {
		return nil, fmt.Errorf("serve's start line names no address: %s", line)
	}
	c.api = "http://" + m[1]
	c.procs = append(c.procs, serve)
	for i := range p.Workers {
		w, err := e.oncesync(fmt.Sprintf("worker%d", i+1), "worker", "--config", c.config,
			"--workers", strconv.Itoa(p.Slots), "--retry-backoff", backoff, "--log-level", "info")
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, w)
	}
	for _, w := range c.procs[1:] {
		if _, err := startLine(ctx, w); err != nil {
			return nil, err
		}
	}
	e.logf("partitioned deployment up: serve (%d slot) + %d workers (%d slots each), sync %s with partitions: %d over %d PostgreSQL rows (page %d), redis %s",
		p.ServeSlots, p.Workers, p.Slots, c.syncID, p.Partitions, p.Rows, p.PageSize, p.RedisURL)
	return c, nil
}

// startLine waits for p's start line ("oncesync serve: ..." or "oncesync
// worker: ...") and returns it.
func startLine(ctx context.Context, p *proc) (string, error) {
	prefix := "oncesync " + p.cmd.Args[1] + ": "
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(p.output(), "\n") {
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		}
		if !p.running() {
			return "", fmt.Errorf("%s exited at start (%d):\n%s", p.name, p.exitCode(), p.tail(20))
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("%s did not start within 60 s:\n%s", p.name, p.tail(20))
}

// setHook sets a function called after every write the fake applied, before
// it answers (nil: none).
func (c *partitioned) setHook(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hook = f
}

// writesSince counts the writes the fake applied after t.
func (c *partitioned) writesSince(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, at := range c.writes {
		if at.After(t) {
			n++
		}
	}
	return n
}

// firstWriteAfter is the first write the fake applied after t.
func (c *partitioned) firstWriteAfter(t time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, at := range c.writes {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// runNow asks serve's API for a run of the sync, as a person would.
func (c *partitioned) runNow(ctx context.Context) error {
	body, _ := json.Marshal(map[string]string{"by": "chaos", "why": "partitioned scenario"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.api+"/api/v1/syncs/"+c.syncID+"/run", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("run now: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return fmt.Errorf("run now: %s: %s", resp.Status, strings.TrimSpace(b.String()))
	}
	return nil
}

// run is the coordinated run (the sync's newest run), once it exists.
func (c *partitioned) run(ctx context.Context) (store.Run, bool, error) {
	runs, err := c.st.ListRuns(ctx, c.syncID, 1)
	if err != nil || len(runs) == 0 {
		return store.Run{}, false, err
	}
	return runs[0], true, nil
}

// waitRunEnd waits for the coordinated run (the newest, with an id above
// after) to leave state running.
func (c *partitioned) waitRunEnd(ctx context.Context, after int64) (store.Run, error) {
	deadline := time.Now().Add(c.p.RunLimit)
	for {
		r, ok, err := c.run(ctx)
		if err == nil && ok && r.ID > after && r.State != store.RunRunning {
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the partitioned run did not end within %s (run %+v, fake %d contacts)", c.p.RunLimit, r, c.dest.fake.Stats().Contacts)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return r, err
		}
	}
}

// waitAttemptsSpent waits until the newest run of every partition failed on
// its job's last attempt.
func (c *partitioned) waitAttemptsSpent(ctx context.Context) error {
	deadline := time.Now().Add(c.p.RunLimit)
	for {
		spent := 0
		for k := 1; k <= c.p.Partitions; k++ {
			runs, err := c.partitionRuns(ctx, k)
			if err == nil && len(runs) > 0 && runs[0].State == store.RunFailed && runs[0].Attempt >= queue.MaxAttempts {
				spent++
			}
		}
		if spent == c.p.Partitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d partitions spent their %d attempts within %s", spent, c.p.Partitions, queue.MaxAttempts, c.p.RunLimit)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// partitionRuns are partition k's runs, newest first.
func (c *partitioned) partitionRuns(ctx context.Context, k int) ([]store.Run, error) {
	return c.st.ListRuns(ctx, partition.SyncID(c.syncID, k), 1000)
}

// deadLetters are the sync's parked dead letters.
func (c *partitioned) deadLetters(ctx context.Context) ([]barrier.DeadLetter, error) {
	dl, ok := c.st.(barrier.DeadLetters)
	if !ok {
		return nil, errors.New("the store keeps no dead letters")
	}
	return dl.ListDeadLetters(ctx, barrier.ListDeadLettersParams{SyncID: c.syncID})
}

// barrierKey is the Redis key of run's barrier.
func (c *partitioned) barrierKey(runID int64) string {
	return rediskey.Default().Barrier(c.syncID, runID)
}

// check is the value checker over the source rows 1..rows (unchanged: a
// partitioned run never writes from a changed view).
func (c *partitioned) check(rows int) valueCounts {
	var v valueCounts
	for i := 1; i <= rows; i++ {
		v.compare(c.dest.fake, want{Email: partitionEmail(i), First: partitionFirstName(i), Label: "id " + strconv.Itoa(i)})
	}
	return v
}

// partitionsByProcess maps each process to the partitions whose runs
// succeeded in it, read from its log.
func (c *partitioned) partitionsByProcess() map[string][]int {
	re := regexp.MustCompile(`msg="run succeeded".* partition=(\d+)`)
	out := map[string][]int{}
	for _, p := range c.procs {
		for _, m := range re.FindAllStringSubmatch(p.output(), -1) {
			k, _ := strconv.Atoi(m[1])
			if !slices.Contains(out[p.name], k) {
				out[p.name] = append(out[p.name], k)
			}
		}
		slices.Sort(out[p.name])
	}
	return out
}

// logCount counts the lines of every process's log that contain s.
func (c *partitioned) logCount(s string) int {
	n := 0
	for _, p := range c.procs {
		n += strings.Count(p.output(), s)
	}
	return n
}

// shutdown stops every process with SIGTERM and checks each exits within
// 25 s and that no run is left running.
func (c *partitioned) shutdown(ctx context.Context, row *Row) {
	sent := time.Now()
	for _, p := range c.procs {
		if p.running() {
			_ = p.signal(syscall.SIGTERM)
		}
	}
	for _, p := range c.procs {
		if _, ok := p.wait(ctx, 30*time.Second); !ok {
			row.problemf("%s did not exit within 30 s of SIGTERM", p.name)
			p.stop()
			continue
		}
		if took := p.exited.Sub(sent); took > 25*time.Second {
			row.problemf("%s took %s to exit after SIGTERM (limit 25 s)", p.name, took.Round(time.Millisecond))
		}
	}
	running, err := c.st.ListRunsByState(ctx, store.RunRunning, 100)
	if err != nil {
		row.problemf("list running runs: %v", err)
	} else if len(running) > 0 {
		row.problemf("%d runs left in state running after every process stopped", len(running))
	}
}

// finishRow fills row's records, delivery and duplicates from the fake, and
// the run count from the store.
func (c *partitioned) finishRow(ctx context.Context, row *Row, rows int) {
	c.check(rows).fill(row)
	st := c.dest.fake.Stats()
	row.DuplicateWrites = st.DuplicateWrites
	n := 0
	if runs, err := c.st.ListRuns(ctx, c.syncID, 1000); err == nil {
		n += len(runs)
	}
	var settled int64
	for k := 1; k <= c.p.Partitions; k++ {
		runs, err := c.partitionRuns(ctx, k)
		if err != nil {
			continue
		}
		n += len(runs)
		for _, r := range runs {
			settled += r.Settled
		}
	}
	row.Runs = int64(n)
	row.InDoubtSettled = settled
	row.notef("fake: %d requests, %d contacts written, %d contacts, statuses %v", st.Requests, st.ContactsWritten, st.Contacts, st.ByStatus)
	if st.ContactsWritten != st.Contacts {
		row.problemf("%d contact writes for %d contacts: some contact was written more than once", st.ContactsWritten, st.Contacts)
	}
}

// partitionedDelivery runs the sync once to the end: every row delivered
// once, the partitions worked by more than one process, no dead letter, the
// barrier released (acceptance 5, first half).
func partitionedDelivery(ctx context.Context, e *env, row *Row, p partitionedParams) (*partitioned, error) {
	c, err := e.newPartitioned(ctx, p)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := c.runNow(ctx); err != nil {
		return c, err
	}
	fin, err := c.waitRunEnd(ctx, 0)
	if err != nil {
		return c, err
	}
	took := time.Since(start)
	row.Runs++
	if fin.State != store.RunSucceeded {
		row.problemf("the partitioned run ended %s (%s: %s)", fin.State, fin.FailureCode, fin.FailureDetail)
	}
	// A page in doubt that a read-back found delivered counts as settled,
	// not written: the two together are what reached the destination
	// (docs/guide.md#the-ledger-and-its-retention).
	if fin.Read != int64(p.Rows) || fin.Written+fin.Settled != int64(p.Rows) {
		row.problemf("the run's counters: read %d, written %d and settled %d of %d rows", fin.Read, fin.Written, fin.Settled, p.Rows)
	}
	row.notef("%d rows in %d partitions delivered in %s (%.0f rows/s from run now to the run's end)",
		p.Rows, p.Partitions, took.Round(100*time.Millisecond), float64(p.Rows)/took.Seconds())
	byProc := c.partitionsByProcess()
	row.notef("partitions succeeded per process: %v", byProc)
	if len(byProc) < 2 {
		row.problemf("the partitions ran in %d process(es), want at least 2: %v", len(byProc), byProc)
	}
	for k := 1; k <= p.Partitions; k++ {
		runs, err := c.partitionRuns(ctx, k)
		if err != nil || len(runs) == 0 || runs[0].State != store.RunSucceeded || runs[0].ID <= fin.ID {
			row.problemf("partition %d: runs %+v (%v)", k, runs, err)
		}
	}
	if dl, err := c.deadLetters(ctx); err != nil || len(dl) != 0 {
		row.problemf("dead letters %+v (%v)", dl, err)
	}
	if n, err := c.rdb.Exists(ctx, c.barrierKey(fin.ID)).Result(); err != nil || n != 0 {
		row.problemf("the run's barrier is still in Redis after the run (%d, %v)", n, err)
	}
	c.shutdown(ctx, row)
	c.finishRow(ctx, row, p.Rows)
	return c, nil
}

// partitionedSourceChanged mutates the source right after the fake applied
// the mutateAt-th write (synchronously, before answering it): some rows are
// updated, more inserted. The run must end source_changed_during_run with
// every partition dead-lettered, and nothing from the changed view may
// reach the fake (acceptance 5, second half). What can be seen at the fake:
//   - no contact carries an updated value, and no inserted row is there;
//   - after the mutation committed, at most one write per partition is
//     applied: the page it had already checked against the barrier before
//     the mutation (read before it, so from the pinned view);
//   - some updated rows were still unwritten when the run stopped, so the
//     first check has teeth.
func partitionedSourceChanged(ctx context.Context, e *env, row *Row, p partitionedParams, mutateAt int) (*partitioned, error) {
	c, err := e.newPartitioned(ctx, p)
	if err != nil {
		return nil, err
	}
	mut, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return c, err
	}
	defer mut.Close(context.WithoutCancel(ctx))
	var (
		once      sync.Once
		n         int
		mutatedAt time.Time
		mutErr    error
		postMu    sync.Mutex
		post      int // writes applied after the mutation committed
	)
	c.setHook(func() {
		postMu.Lock()
		if !mutatedAt.IsZero() {
			post++
		}
		n++
		do := n == mutateAt
		postMu.Unlock()
		if !do {
			return
		}
		once.Do(func() {
			err := c.mutate(context.Background(), mut)
			postMu.Lock()
			mutatedAt, mutErr = time.Now(), err
			postMu.Unlock()
		})
	})
	if err := c.runNow(ctx); err != nil {
		return c, err
	}
	fin, err := c.waitRunEnd(ctx, 0)
	if err != nil {
		return c, err
	}
	row.Runs++
	postMu.Lock()
	at, merr := mutatedAt, mutErr
	postMu.Unlock()
	switch {
	case merr != nil:
		return c, fmt.Errorf("mutate the source: %w", merr)
	case at.IsZero():
		return c, fmt.Errorf("the source was never mutated (%d writes)", n)
	}
	row.Kills++
	if err := c.checkSourceChanged(ctx, row, fin); err != nil {
		return c, err
	}
	c.shutdown(ctx, row)

	postMu.Lock()
	after := post
	postMu.Unlock()
	if after > p.Partitions {
		row.problemf("%d writes applied after the mutation committed; at most one per partition (%d) may be in flight", after, p.Partitions)
	}
	written, unwrittenUpdated := c.checkPinnedView(row)
	row.notef("mutation after write %d; %d writes applied after it committed (limit %d: one in-flight page per partition); %d rows delivered from the pinned view; %d updated rows never written; 0 from the changed view",
		mutateAt, after, p.Partitions, written, unwrittenUpdated)
	return c, nil
}

// insertedRows is how many rows mutate adds (after updating every tenth).
const insertedRows = 1000

// mutate changes the source table: FIRSTNAME "Mutated" on every row whose
// id is a multiple of 10 (moving updated_at, the cursor column, so the
// default version query sees it), and insertedRows new rows.
func (c *partitioned) mutate(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, fmt.Sprintf(`
		UPDATE %[1]s SET first_name = 'Mutated', updated_at = clock_timestamp() WHERE id %% 10 = 0;
		INSERT INTO %[1]s (id, email, first_name)
			SELECT g, 'pt' || lpad(g::text, 7, '0') || '@example.com', 'Inserted' FROM generate_series(%[2]d, %[3]d) g`,
		c.table, c.p.Rows+1, c.p.Rows+insertedRows))
	return err
}

// checkSourceChanged checks a run that met a changed source: it ended
// source_changed_during_run, every partition is dead-lettered with that
// reason against the run's barrier, and every partition's last run failed
// with that code.
func (c *partitioned) checkSourceChanged(ctx context.Context, row *Row, fin store.Run) error {
	if fin.State != store.RunFailed || fin.FailureCode != "source_changed_during_run" {
		row.problemf("the run ended %s/%s, want failed/source_changed_during_run (%s)", fin.State, fin.FailureCode, fin.FailureDetail)
	}
	// Every partition is dead-lettered once its retries ran out (1+2+4 s of
	// backoff at most).
	var (
		dl  []barrier.DeadLetter
		err error
	)
	deadline := time.Now().Add(60 * time.Second)
	for {
		dl, err = c.deadLetters(ctx)
		if err == nil && len(dl) >= c.p.Partitions || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	parts := map[int]bool{}
	for _, d := range dl {
		if d.Reason != barrier.ReasonSourceChanged || d.RunID != fin.ID || d.Snapshot == d.HolderSnapshot {
			row.problemf("dead letter %+v", d)
		}
		parts[d.Partition] = true
	}
	if len(dl) != c.p.Partitions || len(parts) != c.p.Partitions {
		row.problemf("%d dead letters for partitions %v, want one per partition (%d)", len(dl), parts, c.p.Partitions)
	}
	for k := 1; k <= c.p.Partitions; k++ {
		var last store.Run
		for end := time.Now().Add(30 * time.Second); ; {
			runs, err := c.partitionRuns(ctx, k)
			if err == nil && len(runs) > 0 {
				last = runs[0]
			}
			if last.State != "" && last.State != store.RunRunning || time.Now().After(end) {
				break
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
		if last.State != store.RunFailed || last.FailureCode != "source_changed_during_run" {
			row.problemf("partition %d's last run: %s/%s, want failed/source_changed_during_run", k, last.State, last.FailureCode)
		}
	}
	return nil
}

// checkPinnedView checks that nothing from the changed source (see mutate)
// reached the fake: no contact carries an updated value and no inserted
// row is there; some updated rows must still be unwritten (else the check
// proves nothing), and some but not all rows written. It fills row's
// records (the rows written, all from the pinned view) and duplicates.
func (c *partitioned) checkPinnedView(row *Row) (written, unwrittenUpdated int64) {
	var fromChanged int64
	for i := 1; i <= c.p.Rows+insertedRows; i++ {
		ct, ok := c.dest.fake.Contact(partitionEmail(i))
		switch {
		case !ok && i <= c.p.Rows && i%10 == 0:
			unwrittenUpdated++
		case !ok:
		case i > c.p.Rows || fmt.Sprint(ct.Attributes["FIRSTNAME"]) != partitionFirstName(i):
			fromChanged++
		default:
			written++
		}
	}
	if fromChanged > 0 {
		row.problemf("%d contacts at the fake carry the changed source's values", fromChanged)
	}
	if unwrittenUpdated == 0 {
		row.problemf("every updated row had been written before the run stopped: the check proves nothing (mutate earlier)")
	}
	if written == 0 || written >= int64(c.p.Rows) {
		row.problemf("%d rows written before the stop, want some but not all", written)
	}
	st := c.dest.fake.Stats()
	row.Records, row.Delivered, row.Lost = written, written, 0 // the pinned view's rows that were written
	row.DuplicateWrites = st.DuplicateWrites
	if st.ContactsWritten != st.Contacts {
		row.problemf("%d contact writes for %d contacts", st.ContactsWritten, st.Contacts)
	}
	return written, unwrittenUpdated
}

// redisPartitioned: the Redis server of a partitioned run is SIGKILLed once
// the run has written a third of the rows, kept down 15 s, then started
// again on the same port, empty (no persistence: the leases and the run's
// barrier are gone). While it is down the workers must not write (at most
// the page each partition had already checked may land), and the same run
// must converge once it is back: every row delivered, none written twice, no
// dead letter (acceptance 3).
func redisPartitioned(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	// A 2 s first retry: the five attempts of a partition span about 30 s
	// (2+4+8+16), well past the outage.
	p := partitionedParams{Rows: 100000, Partitions: 4, PageSize: 2000, RetryBackoff: 2 * time.Second,
		Fake: fakebrevo.Options{Latency: 20 * time.Millisecond}}
	if e.o.Short {
		p.Rows = 40000
	}
	_, err := redisPartitionedRun(ctx, e, row, p, redisKill{Fraction: 0.3, Outage: 15 * time.Second})
	return row, err
}

// redisKill is how redisPartitionedRun treats Redis.
type redisKill struct {
	// Fraction of the rows at the fake when Redis is SIGKILLed.
	Fraction float64
	// Outage is the least time Redis stays down.
	Outage time.Duration
	// Outlast keeps Redis down until every partition has spent its
	// attempts (use a short RetryBackoff): River discards the jobs, so no
	// partition is left to finish the run. Once Redis is back, the
	// recovery sweep must close the run (failed partitions_unfinished)
	// rather than leave it running, and the next run (run now) converges
	// instead, from the partitions' cursors.
	Outlast bool
	// MutateWhileDown changes the source (see mutate) while Redis is down.
	// The partitions then find the run's barrier gone: restored to the
	// coordinator's pin, it must not let them proceed on the changed view
	// (the run ends source_changed_during_run, every partition
	// dead-lettered, nothing written after the kill but the pages in
	// flight).
	MutateWhileDown bool
}

// redisPartitionedRun is redis-partitioned with any parameters (the tests
// run smaller ones and the variants of redisKill).
func redisPartitionedRun(ctx context.Context, e *env, row *Row, p partitionedParams, k redisKill) (*partitioned, error) {
	r, err := e.startRedis(ctx)
	if err != nil {
		return nil, err
	}
	p.RedisURL = r.URL()
	c, err := e.newPartitioned(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := c.runNow(ctx); err != nil {
		return c, err
	}
	// Kill once the run has written the fraction.
	want := int64(float64(p.Rows) * k.Fraction)
	for c.dest.fake.Stats().Contacts < want {
		if fin, ok, _ := c.run(ctx); ok && fin.State != store.RunRunning {
			return c, fmt.Errorf("the run ended (%s) before Redis was killed: make the source bigger", fin.State)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return c, err
		}
	}
	fin0, _, _ := c.run(ctx)
	barrier := c.barrierKey(fin0.ID)
	pinned, _ := c.rdb.Get(ctx, barrier).Result()
	if err := r.p.signal(syscall.SIGKILL); err != nil {
		return c, err
	}
	if _, ok := r.p.wait(ctx, 10*time.Second); !ok {
		return c, errors.New("redis-server survived SIGKILL")
	}
	killed := time.Now()
	row.Kills++
	atKill := c.dest.fake.Stats()
	e.logf("SIGKILLed Redis with %d of %d rows at the fake (barrier %s held %q); down for %s", atKill.Contacts, p.Rows, barrier, pinned, k.Outage)
	if pinned == "" {
		row.problemf("the run's barrier was not in Redis before the kill")
	}

	// While it is down: at most the page each partition had already checked
	// may land, then nothing.
	grace := 3 * time.Second
	if err := sleep(ctx, grace); err != nil {
		return c, err
	}
	settledStats := c.dest.fake.Stats()
	inFlight := c.writesSince(killed)
	if k.MutateWhileDown {
		if err := c.mutate(ctx, c.src); err != nil {
			return c, fmt.Errorf("mutate the source: %w", err)
		}
		row.Kills++
	}
	if k.Outlast {
		// Keep Redis down until every partition has failed its last attempt
		// (each takes a few seconds of the Redis client's own dial retries).
		if err := c.waitAttemptsSpent(ctx); err != nil {
			return c, fmt.Errorf("with Redis down: %w", err)
		}
	}
	if err := sleep(ctx, time.Until(killed.Add(k.Outage))); err != nil {
		return c, err
	}
	downStats := c.dest.fake.Stats()
	// A partition whose last page was checked before the kill may still
	// succeed: it needs Redis for nothing but the check.
	failedDuring := 0
	for part := 1; part <= p.Partitions; part++ {
		runs, _ := c.partitionRuns(ctx, part)
		for _, pr := range runs {
			if pr.State == store.RunFailed && pr.FinishedAt.After(killed) {
				failedDuring++
			}
		}
	}
	if inFlight > p.Partitions {
		row.problemf("%d writes applied after Redis was killed; at most one in-flight page per partition (%d)", inFlight, p.Partitions)
	}
	if writeRequests(downStats) != writeRequests(settledStats) {
		row.problemf("the fake got %d write requests while Redis was down (after the %s grace for pages in flight)", writeRequests(downStats)-writeRequests(settledStats), grace)
	}
	if err := r.start(ctx); err != nil {
		return c, err
	}
	back := time.Now()
	keysBack := redisKeyCount(ctx, c.rdb)
	e.logf("Redis restarted (empty: %d keys) after %s; %d writes landed after the kill (pages in flight), none for the rest of the outage; %d partition runs failed meanwhile",
		keysBack, back.Sub(killed).Round(100*time.Millisecond), inFlight, failedDuring)
	row.notef("Redis SIGKILLed at %d of %d rows, down %s, restarted empty; %d writes landed after the kill (in flight, limit %d), %d requests during the rest of the outage; %d partition runs failed store_unavailable meanwhile",
		atKill.Contacts, p.Rows, back.Sub(killed).Round(100*time.Millisecond), inFlight, p.Partitions, downStats.Requests-settledStats.Requests, failedDuring)

	fin, err := c.waitRunEnd(ctx, 0)
	if err != nil {
		return c, err
	}
	if fin.ID != fin0.ID {
		row.problemf("the run that ended is %d, not the one running at the kill (%d)", fin.ID, fin0.ID)
	}
	restored := c.logCount("checkpoint barrier restored")
	if k.MutateWhileDown {
		if err := c.checkSourceChanged(ctx, row, fin); err != nil {
			return c, err
		}
		c.shutdown(ctx, row)
		// Writes only: a run may still ask about an import an earlier run's
		// page left accepted (GET /processes/{id}, docs/guide.md#the-ledger-and-its-retention), which reads.
		if n := writeRequests(c.dest.fake.Stats()); n != writeRequests(settledStats) {
			row.problemf("the fake got %d write requests after Redis came back to a changed source", n-writeRequests(settledStats))
		}
		written, unwritten := c.checkPinnedView(row)
		row.notef("source changed while Redis was down: run ended %s/%s, the barrier restored from the pinned snapshot %d times and no partition proceeded; %d rows delivered from the pinned view, %d updated rows never written, 0 from the changed view",
			fin.State, fin.FailureCode, restored, written, unwritten)
		return c, nil
	}
	if k.Outlast {
		// No partition job was left: the recovery sweep closed the run.
		if fin.State != store.RunFailed || fin.FailureCode != "partitions_unfinished" {
			row.problemf("with its partitions' attempts spent, the run ended %s/%s, want failed/partitions_unfinished", fin.State, fin.FailureCode)
		}
		row.notef("the outage outlasted the partitions' attempts: run %d closed %s/%s by recovery %s after Redis was back (%s); run now",
			fin.ID, fin.State, fin.FailureCode, fin.FinishedAt.Sub(back).Round(100*time.Millisecond), fin.FailureDetail)
		row.Runs++
		if err := c.runNow(ctx); err != nil {
			return c, err
		}
		// Right after the restart the Redis client may still answer with
		// its last dial error for a moment (go-redis backs off its dials):
		// a coordinator that cannot pin the snapshot fails its run
		// store_unavailable and River retries it as a new run.
		after := fin0.ID
		for {
			if fin, err = c.waitRunEnd(ctx, after); err != nil {
				return c, err
			}
			if fin.State != store.RunFailed || fin.FailureCode != "store_unavailable" || time.Since(back) > time.Minute {
				break
			}
			row.notef("run %d failed store_unavailable (%s) %s after the restart; River retries it",
				fin.ID, fin.FailureDetail, fin.FinishedAt.Sub(back).Round(100*time.Millisecond))
			after = fin.ID
		}
		barrier = c.barrierKey(fin.ID)
	}
	if at, ok := c.firstWriteAfter(back); ok {
		row.Resume = append(row.Resume, at.Sub(back))
	}
	if fin.State != store.RunSucceeded {
		row.problemf("the partitioned run ended %s (%s: %s), want succeeded", fin.State, fin.FailureCode, fin.FailureDetail)
	}
	if dl, err := c.deadLetters(ctx); err != nil || len(dl) != 0 {
		row.problemf("dead letters after the outage: %+v (%v)", dl, err)
	}
	row.notef("run ended %s %s after Redis came back; the barrier was restored from the pinned snapshot %d times; partitions per process %v",
		fin.State, time.Since(back).Round(100*time.Millisecond), restored, c.partitionsByProcess())
	if n, err := c.rdb.Exists(ctx, barrier).Result(); err != nil || n != 0 {
		row.problemf("the run's barrier is still in Redis after the run (%d, %v)", n, err)
	}
	c.shutdown(ctx, row)
	c.finishRow(ctx, row, p.Rows)
	return c, nil
}

// redisKeyCount counts oncesync's keys in the Redis of rdb (-1 when unknown).
func redisKeyCount(ctx context.Context, rdb *redis.Client) int {
	keys, err := rdb.Keys(ctx, rediskey.Default().Prefix()+"*").Result()
	if err != nil {
		return -1
	}
	return len(keys)
}

// writeRequests is how many requests of st could write (every method but GET).
func writeRequests(st fakebrevo.Stats) int64 {
	n := st.Requests
	for route, c := range st.ByRoute {
		if strings.HasPrefix(route, "GET ") {
			n -= c
		}
	}
	return n
}
