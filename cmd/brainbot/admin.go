package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
)

// endpoint is one of brainbot's HTTP servers: the admin endpoint or the
// webhook. Both may face untrusted clients (the webhook listens on every
// interface by default), so each bounds what one client can hold: time to
// send a request, time to take the answer, an idle keep-alive connection,
// header bytes, and connections at once, its own and all clients'
// (beyond either, a new connection is closed at once).
type endpoint struct {
	name    string // for the log: "admin endpoint", "webhook endpoint"
	handler http.Handler
	limits  httpLimits
}

// httpLimits are an endpoint's bounds; docs/operations.md lists them.
type httpLimits struct {
	readHeader, read, write, idle time.Duration
	maxHeaderBytes                int
	// maxConns bounds the connections of all clients, maxClientConns
	// those of one (an IP address, an IPv6 /64), well below: one client
	// cannot take them all.
	maxConns, maxClientConns int
}

// endpointLimits suit both endpoints: their requests are small (an update
// is a few KB, a metrics page some tens) and quick, and their clients
// (Telegram, a scraper, a health checker) send a request's headers at
// once.
func endpointLimits(maxConns, maxClientConns int) httpLimits {
	return httpLimits{
		readHeader:     3 * time.Second,
		read:           30 * time.Second,
		write:          30 * time.Second,
		idle:           60 * time.Second,
		maxHeaderBytes: 16 << 10,
		maxConns:       maxConns,
		maxClientConns: maxClientConns,
	}
}

// adminEndpoint serves /healthz (the process answers), /readyz (every bot
// polls Telegram; 503 naming the ones that do not) and /metrics. info, if
// given, adds lines to a ready answer (what this instance does in a
// cluster). A scraper and a health checker or two use it.
func adminEndpoint(metrics http.Handler, ready func() error, info ...func() string) endpoint {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
		for _, f := range info {
			fmt.Fprintln(w, f())
		}
	})
	mux.Handle("GET /metrics", metrics)
	return endpoint{name: "admin endpoint", handler: mux, limits: endpointLimits(256, 16)}
}

// withStatus adds /status (statusHandler) to the admin endpoint.
func (e endpoint) withStatus(status http.Handler) endpoint {
	mux := http.NewServeMux()
	mux.Handle("GET /status", status)
	mux.Handle("/", e.handler)
	e.handler = mux
	return e
}

// withBearer has every call but /healthz bring token as "Authorization:
// Bearer <token>" (BRAINBOT_ADMIN_TOKEN), else 401; "" asks nothing, for
// an endpoint on loopback. /healthz stays open: it says only that the
// process answers, and the health checks of load balancers and service
// managers rarely send headers.
func (e endpoint) withBearer(token string) endpoint {
	if token == "" {
		return e
	}
	next, want := e.handler, []byte("Bearer "+token)
	e.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if r.URL.Path != "/healthz" && subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="brainbot"`)
			msg := "this endpoint needs Authorization: Bearer <BRAINBOT_ADMIN_TOKEN>"
			if strings.HasPrefix(string(got), "Bearer ") {
				msg = "wrong admin token"
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
	return e
}

// webhookEndpoint serves Telegram's webhook calls. Telegram opens up to 40
// connections per bot (setWebhook's max_connections), spread over the
// instances behind the load balancer, which may be the one client all of
// them come from.
func webhookEndpoint(handler http.Handler) endpoint {
	return endpoint{name: "webhook endpoint", handler: handler, limits: endpointLimits(2048, 512)}
}

// serve serves the endpoint on addr until stop. It listens before it
// returns, so a bad address fails the start.
func (e endpoint) serve(addr string, log *zap.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := e.limits
	srv := &http.Server{
		Handler:           e.handler,
		ReadHeaderTimeout: l.readHeader,
		ReadTimeout:       l.read,
		WriteTimeout:      l.write,
		IdleTimeout:       l.idle,
		MaxHeaderBytes:    l.maxHeaderBytes,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(newClientLimitListener(ln, l.maxClientConns, l.maxConns)); !errors.Is(err, http.ErrServerClosed) {
			log.Error(e.name+" stopped", zap.Error(err))
		}
	}()
	log.Info(e.name+" listening", zap.String("addr", ln.Addr().String()), zap.Int("max_connections", l.maxConns), zap.Int("max_client_connections", l.maxClientConns))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx) // a call cut short at exit needs no report
		<-done
	}, nil
}
