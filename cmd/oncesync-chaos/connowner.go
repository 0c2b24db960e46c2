package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Telling one process's writes from the others' by the process that owns
// the client end of each connection. Every process must run with the same
// config and the same API key: a worker whose definition of a sync differs
// (another key included) has its runs refused as config_drift
// (docs/guide.md#one-config-on-every-machine), so the scenarios that need
// to see which worker landed a write (cut-off-worker, pauses) cannot give
// it a key of its own.

// connPIDKey is the context key of the pid owning a connection's client end
// (0: none of the tagged processes).
type connPIDKey struct{}

// connContext is the router's http.Server.ConnContext: it finds which of
// the tagged processes holds the client end of c, once per connection.
func (d *dest) connContext(ctx context.Context, c net.Conn) context.Context {
	d.mu.Lock()
	pids := make([]int, 0, len(d.pidTags))
	for pid := range d.pidTags {
		pids = append(pids, pid)
	}
	d.mu.Unlock()
	if len(pids) == 0 {
		return ctx
	}
	pid, err := connOwner(c, pids)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, connPIDKey{}, pid)
}

// tagPID tags every write a process's connections carry; a restarted
// process is tagged again under its new pid.
func (d *dest) tagPID(pid int, tag string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pidTags == nil {
		d.pidTags = map[int]string{}
	}
	d.pidTags[pid] = tag
}

// tagOf is the tag of the process whose connection carried r ("" when
// untagged). The caller holds mu.
func (d *dest) tagOf(ctx context.Context) string {
	pid, _ := ctx.Value(connPIDKey{}).(int)
	if pid == 0 {
		return ""
	}
	return d.pidTags[pid]
}

// connOwner finds which of pids holds the client end of the loopback
// connection c (accepted by this process): the client's socket is the
// /proc/net/tcp row whose local port is c's remote port and whose remote
// port is c's local port; its inode is one of the owner's fds.
func connOwner(c net.Conn, pids []int) (int, error) {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("not a TCP connection")
	}
	var inode string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		var err error
		if inode, err = socketInode(table, remote.Port, local.Port); err != nil {
			return 0, err
		}
		if inode != "" {
			break
		}
	}
	if inode == "" {
		return 0, fmt.Errorf("no socket from port %d to %d", remote.Port, local.Port)
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue // exited
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && l == want {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("socket %s is none of the tagged processes'", inode)
}

// socketInode reads a /proc/net/tcp table for the socket from port from to
// port to (any address) and returns its inode ("" when absent).
func socketInode(table string, from, to int) (string, error) {
	f, err := os.Open(table)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		if hexPort(fields[1]) == from && hexPort(fields[2]) == to {
			return fields[9], nil
		}
	}
	return "", sc.Err()
}

// hexPort is the port of a /proc/net/tcp address ("0100007F:1F90"), -1 when
// it does not parse.
func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(p)
}
