package testenv

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
)

// RefusedAddr is a loopback address ("127.0.0.1:port") whose connections are
// refused for as long as t runs. A port merely closed after net.Listen can be
// handed to the next test's server on a busy machine, which then answers
// (one destination test's retries landed on another's server in CI); here a
// socket stays bound to the port without listening, so the kernel refuses
// every connection and binds nothing else there until t ends.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("refused address: socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("refused address: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("refused address: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("refused address: bound to %T", sa)
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(in4.Port))
}

// RefusedPort is RefusedAddr's port.
func RefusedPort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(RefusedAddr(t))
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("refused address: port %q: %v", port, err)
	}
	return n
}

// ServeTCP is a loopback address whose every connection is handed to serve
// (in turn, on one goroutine) for as long as t runs: another server's
// behaviour at a port oncesync was pointed to by mistake (a greeting it does
// not expect, a hang-up, silence). Connections serve leaves open are closed
// when t ends.
func ServeTCP(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("serve tcp: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var open []net.Conn
		defer func() {
			for _, c := range open {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			open = append(open, c)
			serve(c)
		}
	}()
	return ln.Addr().String()
}
