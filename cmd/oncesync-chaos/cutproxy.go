package main

import (
	"errors"
	"io"
	"net"
	"sync"
)

// cutProxy is a TCP proxy that can stop passing bytes without closing or
// refusing anything: a silent network partition between one process and a
// service. While cut, connections stay open and new ones are accepted, but
// nothing is read from one side and written to the other (the kernel's
// buffers fill and the senders block, as when packets are dropped); when
// healed, what was held flows on. This kernel has no netem, and a refused
// or reset connection is the easy case (the client hears of it at once).
//
// It does what Toxiproxy's `timeout` toxic does with timeout 0, without a
// new module dependency.
type cutProxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	open   chan struct{} // closed while bytes pass
	conns  map[net.Conn]struct{}
	closed bool
}

// newCutProxy listens on a free loopback port and forwards to upstream
// (host:port); it is closed when the scenario ends.
func (e *env) newCutProxy(upstream string) (*cutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &cutProxy{ln: ln, upstream: upstream, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	go p.accept()
	e.onClose(p.close)
	return p, nil
}

// addr is the proxy's host:port.
func (p *cutProxy) addr() string { return p.ln.Addr().String() }

// setCut stops (true) or resumes (false) the flow of bytes.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		if cut {
			p.open = make(chan struct{})
		}
	default:
		if !cut {
			close(p.open)
		}
	}
}

// waitOpen blocks while the proxy is cut.
func (p *cutProxy) waitOpen() {
	p.mu.Lock()
	ch := p.open
	p.mu.Unlock()
	<-ch
}

func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		go p.serve(c)
	}
}

// serve connects client to the upstream once bytes may pass, then copies
// both ways.
func (p *cutProxy) serve(client net.Conn) {
	p.waitOpen()
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(up) {
		_ = client.Close()
		return
	}
	go p.pipe(up, client)
	p.pipe(client, up)
}

// pipe copies src to dst, holding every chunk (and the end of the stream)
// while the proxy is cut.
func (p *cutProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitOpen()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			p.waitOpen()
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite() // half-close, as the peer did
				return
			}
			_ = dst.Close()
			return
		}
	}
}

func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	select {
	case <-p.open:
	default:
		close(p.open) // release the blocked copies so they see the closed conns
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
}
