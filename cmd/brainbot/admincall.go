package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// adminCaller calls the running service's admin endpoint, for the
// commands that are its clients.
type adminCaller struct {
	base, token string
	client      *http.Client
}

// adminCaller parses a client command's flags and reads where the admin
// endpoint is (BRAINBOT_HTTP_ADDR) and its token (BRAINBOT_ADMIN_TOKEN).
func (m *Main) adminCaller(fs *flag.FlagSet, args []string) (adminCaller, error) {
	cfg, err := m.loadConfig(fs, args, settingsNamed("BRAINBOT_HTTP_ADDR"))
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		return adminCaller{}, usageError{err}
	}
	if cfg.HTTPAddr == "" {
		return adminCaller{}, usageError{errors.New("BRAINBOT_HTTP_ADDR (-http-addr) is not set: this command asks the running service at its admin address")}
	}
	host, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		return adminCaller{}, usageError{fmt.Errorf("BRAINBOT_HTTP_ADDR %q: %w", cfg.HTTPAddr, err)}
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // served on every interface: this machine's is one
	}
	return adminCaller{base: "http://" + net.JoinHostPort(host, port), token: cfg.AdminToken,
		client: &http.Client{Timeout: time.Minute}}, nil
}

// do calls path with the query q and returns the answer's body; an error
// says what to do when the service does not answer or refuses.
func (c adminCaller) do(ctx context.Context, method, path string, q map[string]string) ([]byte, error) {
	query := url.Values{}
	for k, v := range q {
		if v != "" {
			query.Set(k, v)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path+"?"+query.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the service does not answer at %s (BRAINBOT_HTTP_ADDR): is brainbot run serving it? %w", c.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("the service's answer: %w", err)
	}
	msg := strings.TrimSpace(string(body))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("the service refused the admin token (%s): set BRAINBOT_ADMIN_TOKEN to the service's", msg)
	case resp.StatusCode == http.StatusNotFound && !strings.HasPrefix(msg, "no such"):
		return nil, fmt.Errorf("the service at %s has no %s: is it an older brainbot? (%s)", c.base, path, msg)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("the service answered %s: %s", resp.Status, msg)
	}
	return body, nil
}
