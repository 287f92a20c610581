// Package httpserve serves an HTTP handler with bounds on what one client
// can hold: brainbot's webhook and admin endpoints both may face
// untrusted clients.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Endpoint is one of brainbot's HTTP servers: the admin endpoint or the
// webhook. Both may face untrusted clients (the webhook listens on every
// interface by default), so each bounds what one client can hold: time to
// send a request, time to take the answer, an idle keep-alive connection,
// header bytes, and connections at once, its own and all clients'
// (beyond either, a new connection is closed at once).
type Endpoint struct {
	Name    string // for the log: "admin endpoint", "webhook endpoint"
	Handler http.Handler
	Limits  Limits
}

// Limits are an endpoint's bounds; docs/security.md lists them.
type Limits struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
	// MaxConns bounds the connections of all clients, MaxClientConns
	// those of one (an IP address, an IPv6 /64; the admin socket's are
	// one client), well below: one client cannot take them all.
	MaxConns, MaxClientConns int
}

// For suits both endpoints: their requests are small (an update
// is a few KB, a metrics page some tens) and quick, and their clients
// (Telegram, a scraper, a health checker) send a request's headers at
// once.
func For(maxConns, maxClientConns int) Limits {
	return Limits{
		ReadHeader:     3 * time.Second,
		Read:           30 * time.Second,
		Write:          30 * time.Second,
		Idle:           60 * time.Second,
		MaxHeaderBytes: 16 << 10,
		MaxConns:       maxConns,
		MaxClientConns: maxClientConns,
	}
}

// ListenAndServe serves the endpoint on the TCP address addr until stop.
// It listens before it returns, so a bad address fails the start.
func (e Endpoint) ListenAndServe(addr string, log *zap.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return e.Serve(ln, log), nil
}

// Serve serves the endpoint on ln until stop, which closes ln.
func (e Endpoint) Serve(ln net.Listener, log *zap.Logger) (stop func()) {
	l := e.Limits
	srv := &http.Server{
		Handler:           e.Handler,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(newClientLimitListener(ln, l.MaxClientConns, l.MaxConns)); !errors.Is(err, http.ErrServerClosed) {
			log.Error(e.Name+" stopped", zap.Error(err))
		}
	}()
	log.Info(e.Name+" listening", zap.String("addr", ln.Addr().String()), zap.Int("max_connections", l.MaxConns), zap.Int("max_client_connections", l.MaxClientConns))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx) // a call cut short at exit needs no report
		<-done
	}
}
