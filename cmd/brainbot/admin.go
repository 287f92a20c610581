package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// serveAdmin serves the admin endpoint on addr: /healthz (the process
// answers), /readyz (every bot polls Telegram; 503 naming the ones that do
// not) and /metrics. It listens before it returns, so a bad address fails
// the start; stop shuts it down. info, if given, adds lines to a ready
// answer (what this instance does in a cluster).
func serveAdmin(addr string, metrics http.Handler, ready func() error, log *zap.Logger, info ...func() string) (stop func(), err error) {
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin endpoint stopped", zap.Error(err))
		}
	}()
	log.Info("admin endpoint listening", zap.String("addr", ln.Addr().String()))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx) // a scrape cut short at exit needs no report
		<-done
	}, nil
}

// serveWebhook serves Telegram's webhook calls on addr until stop.
func serveWebhook(addr string, handler http.Handler, log *zap.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("webhook endpoint stopped", zap.Error(err))
		}
	}()
	log.Info("webhook endpoint listening", zap.String("addr", ln.Addr().String()))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
