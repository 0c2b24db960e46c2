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
