// Package natstest starts real NATS servers with JetStream on loopback for
// tests (the nats-server module, in process): nothing is mocked.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is one NATS server with JetStream that a test can stop and
// start again: on the same port, with the same store, as an operator
// restarting nats-server.
type Server struct {
	t    testing.TB
	opts server.Options
	// URL is the server's client URL, the same across restarts.
	URL string

	mu sync.Mutex
	s  *server.Server
}

// Start runs a NATS server with JetStream on a free loopback port, its
// store in a temporary folder, until the test ends; it returns its URL.
func Start(t testing.TB) string { return StartServer(t).URL }

// StartServer is Start for a test that stops the server and starts it
// again (Stop, Restart), or sets options of its own (configure: users,
// say).
func StartServer(t testing.TB, configure ...func(*server.Options)) *Server {
	t.Helper()
	port := freePort(t)
	s := &Server{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}, URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	for _, c := range configure {
		c(&s.opts)
	}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Stop shuts the server down (a no-op when it is not running).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return
	}
	s.s.Shutdown()
	s.s.WaitForShutdown()
	s.s = nil
}

// Restart starts the server again after Stop, with what it stored.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		return
	}
	opts := s.opts // the server keeps and changes its options
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		s.t.Fatal("natstest: server not ready")
	}
	s.s = srv
}

// freePort is a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// StartCluster runs n NATS servers routed into one cluster with JetStream
// (each with its own store), until the test ends, and waits until
// JetStream has a leader. It returns the servers and their client URLs.
func StartCluster(t testing.TB, n int) ([]*server.Server, []string) {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	var servers []*server.Server
	var urls []string
	for i := range n {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "brainbot", Host: "127.0.0.1", Port: ports[i]},
			Routes:     routes,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
		servers = append(servers, s)
	}
	for _, s := range servers {
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("natstest: server not ready")
		}
		urls = append(urls, s.ClientURL())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := 0
		for _, s := range servers {
			if s.JetStreamIsCurrent() {
				ready++
			}
		}
		if ready == n && anyLeader(servers) {
			return servers, urls
		}
		if time.Now().After(deadline) {
			t.Fatal("natstest: JetStream cluster has no leader")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func anyLeader(servers []*server.Server) bool {
	for _, s := range servers {
		if s.JetStreamIsLeader() {
			return true
		}
	}
	return false
}
