package admin

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
)

// Access is who may make a call.
type Access int

const (
	// Anyone: whoever reaches the surface; /healthz, which says only that
	// the process answers, for health checkers that send no headers.
	Anyone Access = iota
	// Monitor: a local monitor too (/readyz, /metrics): on the loopback
	// admin address without a token, as a local Prometheus scrapes.
	Monitor
	// Admin: the admin alone (status, conversations, transcripts,
	// forget): through the admin socket, or with the admin token.
	Admin
)

// Way is the way a request came in.
type Way int

const (
	// Address: the TCP admin address (BRAINBOT_HTTP_ADDR). Every local
	// account reaches it on loopback, and other machines off it; TCP says
	// nothing of who calls.
	Address Way = iota
	// Socket: the admin socket, a Unix socket whose file only the
	// service's user (and root) may open: the kernel has checked who
	// calls.
	Socket
)

// rule is who may call what: the one place that decides.
type rule struct {
	// token is BRAINBOT_ADMIN_TOKEN ("": none set).
	token string
}

// refusal says why a call is refused: its HTTP status and a message
// that tells the caller what to do.
type refusal struct {
	code int
	msg  string
}

// check decides whether r, come in the given way, may make a call that
// needs access. The order matters: a credential first (nothing a browser
// page can forge), then the Host (a page on a rebound name carries its
// own), then the way in.
func (ru rule) check(r *http.Request, way Way, access Access) *refusal {
	if access == Anyone {
		return nil
	}
	authorized := ru.authorized(r)
	if !authorized && !addressedDirectly(r.Host) {
		// A call without a credential is taken only when it names this
		// machine by a loopback name or an address: a page that made its
		// own name resolve to 127.0.0.1 (DNS rebinding) names itself, and
		// would otherwise read what the tunnel or the loopback port serves.
		return &refusal{http.StatusForbidden, "Host " + r.Host + " is not this machine's: call the admin address by an IP address or localhost"}
	}
	switch {
	case authorized, way == Socket:
		return nil
	case ru.token != "" && r.Header.Get("Authorization") != "":
		return &refusal{http.StatusUnauthorized, "wrong admin token"}
	case ru.token != "":
		return &refusal{http.StatusUnauthorized, "this call needs Authorization: Bearer <BRAINBOT_ADMIN_TOKEN> (a browser signs in at /login)"}
	case access == Monitor:
		return nil // on loopback: the configuration allows no other address without a token
	default:
		return &refusal{http.StatusForbidden, "conversations, transcripts and forget are the admin's: on this machine " +
			"brainbot status, conversations and forget ask through the admin socket (as root or the service's user); " +
			"over the network set BRAINBOT_ADMIN_TOKEN"}
	}
}

// authorized: r brings the admin token, as a bearer token or as the
// cookie /login gave a browser.
func (ru rule) authorized(r *http.Request) bool {
	if ru.token == "" {
		return false
	}
	if got := r.Header.Get("Authorization"); got != "" {
		return subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+ru.token)) == 1
	}
	c, err := r.Cookie(cookieName)
	return err == nil && hmac.Equal([]byte(c.Value), []byte(ru.cookieValue()))
}

// cookieName is the browser's sign-in cookie.
const cookieName = "brainbot_admin"

// cookieValue is what the sign-in cookie holds: derived from the token,
// so that a new token signs every browser out, and not the token itself,
// which a cookie store would otherwise keep.
func (ru rule) cookieValue() string {
	mac := hmac.New(sha256.New, []byte(ru.token))
	mac.Write([]byte("brainbot admin sign-in"))
	return hex.EncodeToString(mac.Sum(nil))
}

// addressedDirectly: host (a Host header, with or without a port) is an IP
// address or localhost. An address can be no rebound name; a browser
// page's origin is then that address itself.
func addressedDirectly(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	return net.ParseIP(host) != nil || strings.EqualFold(host, "localhost")
}

type wayKey struct{}

// withWay marks the requests h serves as come in the given way.
func withWay(h http.Handler, way Way) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), wayKey{}, way)))
	})
}

// wayOf is the way r came in: the address unless marked otherwise.
func wayOf(r *http.Request) Way {
	way, _ := r.Context().Value(wayKey{}).(Way)
	return way
}
