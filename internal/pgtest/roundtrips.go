package pgtest

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// RoundTrips is a TCP proxy in front of the PostgreSQL server that counts
// the client's round trips: each simple Query ('Q') and each Sync ('S')
// that ends an extended-protocol exchange or a pipeline is one wait for
// the server's answer.
type RoundTrips struct {
	ln     net.Listener
	target string
	n      atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	// cut, while set, drops every connection and refuses new ones: the
	// server is unreachable (Cut, Restore).
	cut bool
}

// Cut makes the server unreachable through the proxy, as a network
// partition or a server restart would: the open connections are closed
// and new ones are closed as soon as they are accepted, until Restore.
func (p *RoundTrips) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore makes the server reachable through the proxy again.
func (p *RoundTrips) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Proxy starts a RoundTrips for the server rawURL names and returns it
// with rawURL pointed at it. It stops when the test ends.
func Proxy(t testing.TB, rawURL string) (*RoundTrips, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &RoundTrips{ln: ln, target: u.Host}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed = true
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	p.wg.Go(p.accept)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *RoundTrips) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		if p.cut {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() {
			io.Copy(c, s) //nolint:errcheck // ends when either side closes
			c.Close()
		})
		p.wg.Go(func() {
			p.count(s, c) //nolint:errcheck // ends when either side closes
			s.Close()
		})
	}
}

// count copies the client's messages to the server, counting the ones
// that wait for an answer. The startup message has no type byte.
func (p *RoundTrips) count(dst io.Writer, src io.Reader) error {
	r := bufio.NewReader(src)
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := int64(binary.BigEndian.Uint32(n[:]))
	if _, err := dst.Write(n[:]); err != nil {
		return err
	}
	if _, err := io.CopyN(dst, r, size-4); err != nil {
		return err
	}
	for {
		var h [5]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		if h[0] == 'Q' || h[0] == 'S' {
			p.n.Add(1)
		}
		if _, err := dst.Write(h[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(dst, r, int64(binary.BigEndian.Uint32(h[1:]))-4); err != nil {
			return err
		}
	}
}

// Count is the round trips so far, over every connection.
func (p *RoundTrips) Count() int64 { return p.n.Load() }
