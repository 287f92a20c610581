package httpserve

import (
	"net"
	"net/netip"
	"sync"
)

// clientLimitListener accepts at most perClient connections at once from
// one client, and total from all, and closes at once a connection beyond
// either: refused, not queued, so that a client that holds its share (a
// slow one holding half-sent requests) makes no other client wait, as
// one cap for all did.
type clientLimitListener struct {
	net.Listener
	perClient, total int

	mu   sync.Mutex
	open map[netip.Prefix]int // connections held, by client
	all  int
}

func newClientLimitListener(l net.Listener, perClient, total int) *clientLimitListener {
	return &clientLimitListener{Listener: l, perClient: perClient, total: total, open: map[netip.Prefix]int{}}
}

func (l *clientLimitListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientOf(conn.RemoteAddr())
		if !l.take(client) {
			conn.Close()
			continue
		}
		return &limitedConn{Conn: conn, release: sync.OnceFunc(func() { l.release(client) })}, nil
	}
}

func (l *clientLimitListener) take(client netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.all >= l.total || l.open[client] >= l.perClient {
		return false
	}
	l.all++
	l.open[client]++
	return true
}

func (l *clientLimitListener) release(client netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.open[client]--; l.open[client] <= 0 {
		delete(l.open, client)
	}
}

// clientOf is the client a connection comes from: its IPv4 address, or
// its IPv6 /64, which one host is given whole.
func clientOf(addr net.Addr) netip.Prefix {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := tcp.AddrPort().Addr().Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	client, _ := ip.Prefix(bits)
	return client
}

// limitedConn gives its place back when closed (the server may close it
// more than once).
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
