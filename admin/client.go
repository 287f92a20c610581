package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Client asks the running service, for the admin's commands: through the
// admin socket where this account may open it, else at the admin address
// with the admin token.
type Client struct {
	// Socket is the admin socket's path.
	Socket string
	// Addr is the admin address (BRAINBOT_HTTP_ADDR, "": none) and Token
	// the admin token it asks for (BRAINBOT_ADMIN_TOKEN): the way in from
	// an account or a machine that cannot open the socket.
	Addr, Token string
}

// Do calls path, with query (may be nil), and returns the answer's body;
// its errors say what to do.
func (c Client) Do(ctx context.Context, method, path string, query url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client, base, err := c.way()
	if err != nil {
		return nil, err
	}
	target := base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, fmt.Errorf("BRAINBOT_HTTP_ADDR %q: %w", c.Addr, err)
	}
	req.Header.Set("Accept", "application/json")
	if base != socketBase {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no answer from brainbot at %s: is the service running, with this %s? %w", c.where(base), c.setting(base), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", target, err)
	}
	msg := strings.TrimSpace(string(body))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, errors.New("the service refused BRAINBOT_ADMIN_TOKEN: it is not the one the service runs with")
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(msg, "no such"):
		return nil, errors.New(msg) // the call's own answer: nothing of that name
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%s at %s: not found: the service is a brainbot older than this command, or not brainbot", path, c.where(base))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s at %s: %s: %s", path, c.where(base), resp.Status, msg)
	}
	return body, nil
}

// socketBase is the base URL of a call through the socket: localhost, a
// name the surface takes from a caller without a credential.
const socketBase = "http://localhost"

// way chooses the way in: the socket if this account may open it, else
// the address with the token.
func (c Client) way() (*http.Client, string, error) {
	err := canOpen(c.Socket)
	if err == nil {
		dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", c.Socket)
		}
		return &http.Client{Transport: &http.Transport{DialContext: dial}}, socketBase, nil
	}
	if c.Addr != "" && c.Token != "" {
		return http.DefaultClient, "http://" + Dialable(c.Addr), nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, "", fmt.Errorf("the admin socket %s is the service's user's: run this command as root or as that user "+
			"(sudo brainbot ... -env-file /etc/brainbot/brainbot.env), or give it BRAINBOT_HTTP_ADDR and BRAINBOT_ADMIN_TOKEN", c.Socket)
	}
	return nil, "", fmt.Errorf("no admin socket at %s (%v): is the service running, with this data folder (BRAINBOT_DATA, or BRAINBOT_ADMIN_SOCKET)? "+
		"From elsewhere, give the command BRAINBOT_HTTP_ADDR and BRAINBOT_ADMIN_TOKEN", c.Socket, errors.Unwrap(err))
}

// canOpen says whether this account may connect to the socket at path: it
// must exist, and be writable.
func canOpen(path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrPermission) {
		return err
	}
	if f != nil {
		f.Close()
	}
	return nil // opening a socket as a file fails otherwise (ENXIO): connecting is what counts
}

func (c Client) where(base string) string {
	if base == socketBase {
		return c.Socket
	}
	return base
}

func (c Client) setting(base string) string {
	if base == socketBase {
		return "data folder (BRAINBOT_DATA, or BRAINBOT_ADMIN_SOCKET)"
	}
	return "admin address (BRAINBOT_HTTP_ADDR)"
}

// Dialable is the address to reach a listen address at: on every
// interface (":9464", "0.0.0.0:9464", "[::]:9464") it is this machine's
// loopback.
func Dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr // the request says what is wrong with it
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
