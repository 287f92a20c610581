package natstest

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Gate is a loopback relay to a server that a test can shut and open
// again: the clients connected through it lose NATS (their connections
// dropped, new ones refused) while the others keep it, as one instance
// slow to come back after an outage.
type Gate struct {
	// URL is the gate's client URL.
	URL    string
	target string

	mu    sync.Mutex
	shut  bool
	conns map[net.Conn]bool
}

// NewGate opens a gate to the server at url until the test ends.
func NewGate(t testing.TB, url string) *Gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{URL: fmt.Sprintf("nats://%s", ln.Addr()), target: strings.TrimPrefix(url, "nats://"), conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		g.Shut()
	})
	go g.serve(ln)
	return g
}

// Shut drops the connections through the gate and refuses new ones.
func (g *Gate) Shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = true
	for c := range g.conns {
		c.Close()
	}
	clear(g.conns)
}

// Open lets connections through again.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = false
}

func (g *Gate) serve(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return // the test ended
		}
		go g.relay(client)
	}
}

// relay joins client to the server while both ends and the gate stay
// open.
func (g *Gate) relay(client net.Conn) {
	server, err := net.Dial("tcp", g.target)
	if err != nil {
		client.Close() // the server is away: the client tries again
		return
	}
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	g.conns[client], g.conns[server] = true, true
	g.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	g.mu.Lock()
	delete(g.conns, client)
	delete(g.conns, server)
	g.mu.Unlock()
	client.Close()
	server.Close()
}
