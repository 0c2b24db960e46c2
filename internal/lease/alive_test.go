package lease_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/lease"
)

// TestZombieIsNotAlive: a holder killed (kill -9, the OOM killer) whose
// parent has not reaped it yet is a zombie: it has exited and writes
// nothing, but signal 0 still finds it. A run started right after (cron's
// next `oncesync run`, whose previous one timeout -s KILL stopped) was
// skipped with already_running although `status` said the next run takes
// the sync over at once.
func TestZombieIsNotAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("start sleep: %v", err)
	}
	pid := cmd.Process.Pid
	p := lease.Process{PID: pid}
	if !p.Alive() {
		t.Fatal("a running process is not alive")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	// Not reaped: the process stays a zombie until Wait.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if _, rest, _ := strings.Cut(string(b), ") "); strings.HasPrefix(rest, "Z") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became a zombie: %s", pid, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if p.Alive() {
		t.Fatalf("pid %d is a zombie (killed, not yet reaped) and reads as alive", pid)
	}
}
