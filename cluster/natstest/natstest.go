// Package natstest starts real NATS servers with JetStream on loopback for
// tests (the nats-server module, in process): nothing is mocked.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs a NATS server with JetStream on a free loopback port, its
// store in a temporary folder, until the test ends; it returns its URL.
func Start(t testing.TB) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("natstest: server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s.ClientURL()
}

// StartCluster runs n NATS servers routed into one cluster with JetStream
// (each with its own store), until the test ends, and waits until
// JetStream has a leader. It returns the servers and their client URLs.
func StartCluster(t testing.TB, n int) ([]*server.Server, []string) {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
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
