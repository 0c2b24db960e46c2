package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestConnOwnerFindsTheClientProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	// Another process's connection: bash holds the client end.
	child := exec.Command("bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d; sleep 10", port))
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	theirs, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()

	// This process's own connection.
	mine, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	ours, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()

	pids := []int{os.Getpid(), child.Process.Pid}
	if got, err := connOwner(theirs, pids); err != nil || got != child.Process.Pid {
		t.Errorf("owner of the child's connection: %d, %v; want %d", got, err, child.Process.Pid)
	}
	if got, err := connOwner(ours, pids); err != nil || got != os.Getpid() {
		t.Errorf("owner of our connection: %d, %v; want %d", got, err, os.Getpid())
	}
	if got, err := connOwner(theirs, []int{os.Getpid()}); err == nil {
		t.Errorf("the child's connection without the child tagged: owner %d, want an error", got)
	}
}
