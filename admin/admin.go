// Package admin is brainbot's admin surface: the calls an admin and a
// monitor make of the running service (/healthz, /readyz, /metrics,
// /status, the conversations and forget), who may make each, and the
// admin socket they come through on the service's own machine.
//
// Who may call what is decided in one place (rule.check), for two ways
// in. The admin socket is a Unix socket whose file only the service's
// user and root may open: the kernel checks who calls, so the admin's
// commands need no token. The admin address (BRAINBOT_HTTP_ADDR) is TCP,
// which every local account reaches on loopback: without the admin
// token it serves only what a monitor needs. A call without a credential
// must name this machine by an address or localhost (no rebound DNS
// name), and no call that changes something is taken from another site
// (http.CrossOriginProtection).
package admin

import (
	"fmt"
	"net/http"
)

// Config is what the surface serves.
type Config struct {
	// Token is BRAINBOT_ADMIN_TOKEN: with it, the address serves the
	// admin (a bearer token, or a browser's sign-in) and asks it of
	// monitors too ("": the address serves monitors alone).
	Token string
	// Ready says why the service is not ready (nil: it is); Info adds
	// lines to a ready answer.
	Ready func() error
	Info  []func() string
	// Metrics serves /metrics.
	Metrics http.Handler
	// Status is what /status reports.
	Status StatusSource
	// Conversations serves the conversations and forget.
	Conversations Conversations
}

// Surface serves the admin calls, each to whom may make it.
type Surface struct {
	handler http.Handler
}

// route is one call of the surface and who may make it.
type route struct {
	pattern string
	access  Access
	handler http.HandlerFunc
}

// New makes the surface of cfg. The table below is the whole of who may
// call what.
func New(cfg Config) *Surface {
	conv := cfg.Conversations
	routes := []route{
		{"GET /healthz", Anyone, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }},
		{"GET /login", Anyone, nil},
		{"POST /login", Anyone, nil},
		{"GET /readyz", Monitor, readyHandler(cfg.Ready, cfg.Info)},
		{"GET /metrics", Monitor, cfg.Metrics.ServeHTTP},
		{"GET /status", Admin, statusHandler(cfg.Status)},
		{"GET /conversations", Admin, conv.list},
		{"GET /conversations/show", Admin, conv.show},
		{"POST /forget", Admin, conv.forgetUser},
	}
	ru := rule{token: cfg.Token}
	mux := http.NewServeMux()
	for _, rt := range routes {
		if rt.handler == nil {
			rt.handler = ru.login
		}
		mux.Handle(rt.pattern, ru.guard(rt))
	}
	return &Surface{handler: http.NewCrossOriginProtection().Handler(mux)}
}

// Handler serves the requests that come in the given way.
func (s *Surface) Handler(way Way) http.Handler { return withWay(s.handler, way) }

// guard serves rt to whom may make it, and refuses the others.
func (ru rule) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if no := ru.check(r, wayOf(r), rt.access); no != nil {
			if no.code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="brainbot"`)
			}
			http.Error(w, no.msg, no.code)
			return
		}
		rt.handler(w, r)
	})
}

func readyHandler(ready func() error, info []func() string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
		for _, f := range info {
			fmt.Fprintln(w, f())
		}
	}
}
