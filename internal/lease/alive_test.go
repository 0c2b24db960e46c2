package lease_test

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/oncesync/oncesync/internal/lease"
)

// TestZombieHolderIsDead: a worker killed with SIGKILL whose parent has not
// reaped it yet (a supervisor that waits later, a shell that never does) is a
// zombie: it can write nothing more, yet signal 0 still finds it. Taken for
// alive, its sync was refused to the next run ("Another run of this sync was
// already in progress", exit 3) until its lease expired, where
// docs/guide.md#why-a-dead-worker-costs-nothing promises a takeover at once.
func TestZombieHolderIsDead(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: zombies cannot be told from live processes here")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	self := lease.ThisProcess()
	holder := self
	holder.PID = cmd.Process.Pid
	if !holder.Alive() || lease.DeadHere(holder.String(), self) {
		t.Fatal("a running child reads as dead")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not reaped: wait (without reaping) until the kernel made it a zombie.
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(holder.PID) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if state(b) == 'Z' {
			break
		}
		runtime.Gosched()
	}
	if holder.Alive() {
		t.Error("a killed, unreaped worker (a zombie) reads as alive")
	}
	if !lease.DeadHere(holder.String(), self) {
		t.Error("DeadHere: a zombie holder is not taken over at once")
	}
	_ = cmd.Wait()
	if holder.Alive() {
		t.Error("a reaped worker reads as alive")
	}
}

// state is the state letter of a /proc/PID/stat line (after the last ')').
func state(b []byte) byte {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2]
		}
	}
	return 0
}
