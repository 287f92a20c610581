package admin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"brainbot/state"
)

const testToken = "0123456789abcdef0123"

// testSurface is a surface with every call answering, the status of
// testStatusSource and a forget that records whom it forgot.
func testSurface(token string, forgot *[]int64) *Surface {
	return New(Config{
		Token:   token,
		Ready:   func() error { return nil },
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "brainbot_ready 1") }),
		Status:  testStatusSource(nil),
		Conversations: Conversations{State: nil, Claude: transcriptsIn(""), Log: zap.NewNop(),
			Forget: func(_ context.Context, bot string, user int64) (state.Forgotten, error) {
				*forgot = append(*forgot, user)
				return state.Forgotten{Bot: bot, User: user}, nil
			}},
	})
}

// call is one request made of the surface, with what a client sends.
type call struct {
	way            Way
	method, target string
	host           string
	header         map[string]string
}

func (c call) do(t *testing.T, s *Surface) (int, string) {
	t.Helper()
	req := httptest.NewRequest(c.method, "http://127.0.0.1:9464"+c.target, nil)
	if c.host != "" {
		req.Host = c.host
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.Handler(c.way).ServeHTTP(w, req)
	body, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(body)
}

// Who may call what, without a token set, as the package sets it up: the
// admin address on loopback serves monitors and no admin call, whoever
// asks; the admin socket serves the admin, unless the call names a
// foreign host (a page on a rebound name through a tunnel) or comes from
// another site's page.
func TestWhoMayCallWhatWithoutAToken(t *testing.T) {
	var forgot []int64
	s := testSurface("", &forgot)
	crossSite := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site",
		"Content-Type": "application/x-www-form-urlencoded"}
	for _, c := range []struct {
		call
		code int
		has  string
	}{
		{call{Address, "GET", "/healthz", "", nil}, 200, "ok"},
		{call{Address, "GET", "/readyz", "", nil}, 200, "ready"},
		{call{Address, "GET", "/metrics", "localhost:9464", nil}, 200, "brainbot_ready 1"},
		{call{Address, "GET", "/status", "", nil}, 403, "admin socket"},
		{call{Address, "GET", "/conversations", "", nil}, 403, "admin socket"},
		{call{Address, "GET", "/conversations/show?bot=chat&chat=7", "", nil}, 403, "admin socket"},
		{call{Address, "POST", "/forget?user=7", "", nil}, 403, "admin socket"},
		{call{Address, "GET", "/login", "", nil}, 404, "no admin token is set"},
		// DNS rebinding: a page on evil.example, made to resolve to
		// 127.0.0.1, names itself.
		{call{Address, "GET", "/metrics", "evil.example:9464", nil}, 403, "not this machine's"},
		{call{Socket, "GET", "/status", "evil.example:9464", nil}, 403, "not this machine's"},
		{call{Socket, "GET", "/conversations", "evil.example", nil}, 403, "not this machine's"},
		{call{Socket, "GET", "/status", "localhost", nil}, 200, `"instance": "b"`},
		{call{Socket, "GET", "/status", "[::1]:9464", nil}, 200, `"instance": "b"`},
		{call{Socket, "GET", "/healthz", "evil.example", nil}, 200, "ok"},
		// A form on another site's page, posted by the admin's browser
		// through the tunnel.
		{call{Socket, "POST", "/forget?user=7", "localhost:9464", crossSite}, 403, "cross-origin"},
		{call{Socket, "POST", "/forget?user=7", "localhost:9464", map[string]string{"Origin": "http://evil.example"}}, 403, "cross-origin"},
		{call{Socket, "POST", "/forget?user=8", "localhost", nil}, 200, `"user": 8`},
	} {
		code, body := c.do(t, s)
		if code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("%v %s %s (Host %q, %v) = %d %q, want %d with %q", c.way, c.method, c.target, c.host, c.header, code, body, c.code, c.has)
		}
	}
	if len(forgot) != 1 || forgot[0] != 8 {
		t.Errorf("forgot %v, want user 8 alone", forgot)
	}
}

// With BRAINBOT_ADMIN_TOKEN, every call on the address but /healthz
// brings the token, as a bearer token or as the cookie a browser gets at
// /login; without it or with another one it gets 401 and nothing of the
// answer. A call with the token may name any host (a scraper calls the
// machine by its DNS name); the socket asks no token.
func TestWhoMayCallWhatWithAToken(t *testing.T) {
	var forgot []int64
	s := testSurface(testToken, &forgot)
	bearer := func(v string) map[string]string { return map[string]string{"Authorization": v} }
	for _, c := range []struct {
		call
		code int
		has  string
	}{
		{call{Address, "GET", "/healthz", "", nil}, 200, "ok"},
		{call{Address, "GET", "/metrics", "", nil}, 401, "needs Authorization: Bearer"},
		{call{Address, "GET", "/readyz", "", bearer("Bearer wrong-token-of-the-same-size")}, 401, "wrong admin token"},
		{call{Address, "GET", "/metrics", "", bearer("Basic " + testToken)}, 401, "wrong admin token"},
		{call{Address, "GET", "/metrics", "bot1.example.com:9464", bearer("Bearer " + testToken)}, 200, "brainbot_ready 1"},
		{call{Address, "GET", "/readyz", "", bearer("Bearer " + testToken)}, 200, "ready"},
		{call{Address, "GET", "/status", "", nil}, 401, "signs in at /login"},
		{call{Address, "GET", "/status", "", bearer("Bearer " + testToken)}, 200, `"instance": "b"`},
		{call{Address, "GET", "/status", "", map[string]string{"Cookie": cookieName + "=" + testToken}}, 401, ""},
		{call{Address, "POST", "/forget?user=9", "", bearer("Bearer " + testToken)}, 200, `"user": 9`},
		{call{Socket, "GET", "/status", "localhost", nil}, 200, `"instance": "b"`},
		{call{Address, "GET", "/login", "", nil}, 200, `<input type="password" name="token"`},
	} {
		code, body := c.do(t, s)
		if code != c.code || !strings.Contains(body, c.has) || code == 401 && strings.Contains(body, "narrator") {
			t.Errorf("%v %s %s (Host %q, %v) = %d %q, want %d with %q", c.way, c.method, c.target, c.host, c.header, code, body, c.code, c.has)
		}
	}
	if len(forgot) != 1 || forgot[0] != 9 {
		t.Errorf("forgot %v, want user 9 alone", forgot)
	}
}

// A browser signs in at /login with the token (the form, or a link with
// ?token=) and is sent to /status with a cookie that holds no token and
// no other site can make it send; a wrong token gets no cookie.
func TestBrowserSignIn(t *testing.T) {
	var forgot []int64
	srv := httptest.NewServer(testSurface(testToken, &forgot).Handler(Address))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := noRedirect.PostForm(srv.URL+"/login", url.Values{"token": {"a-wrong-token-of-some-length"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("a wrong token: %d with cookies %v, want 401 and none", resp.StatusCode, resp.Cookies())
	}
	for _, signIn := range []func() (*http.Response, error){
		func() (*http.Response, error) {
			return noRedirect.PostForm(srv.URL+"/login", url.Values{"token": {testToken}})
		},
		func() (*http.Response, error) { return noRedirect.Get(srv.URL + "/login?token=" + testToken) },
	} {
		resp, err := signIn()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/status" || len(cookies) != 1 {
			t.Fatalf("sign-in: %d to %q with %v, want 303 to /status with a cookie", resp.StatusCode, resp.Header.Get("Location"), cookies)
		}
		c := cookies[0]
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, testToken) {
			t.Errorf("cookie %+v, want HttpOnly, SameSite=Strict, without the token", c)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/status", nil)
		req.AddCookie(c)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "narrator") {
			t.Errorf("/status with the cookie: %d %q", resp.StatusCode, body)
		}
	}
}

func TestAddressedDirectly(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:9464": true, "localhost.:80": true, "127.0.0.1:9464": true, "[::1]:9464": true,
		"10.0.0.5:9464": true, "": false, "evil.example": false, "localhost.evil.example:9464": false,
		"127.0.0.1.nip.io": false,
	} {
		if got := addressedDirectly(host); got != want {
			t.Errorf("addressedDirectly(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestDialable(t *testing.T) {
	for addr, want := range map[string]string{":9464": "127.0.0.1:9464", "[::]:9464": "127.0.0.1:9464", "10.0.0.5:9464": "10.0.0.5:9464"} {
		if got := Dialable(addr); got != want {
			t.Errorf("Dialable(%s) = %s, want %s", addr, got, want)
		}
	}
}

// The admin socket is made wherever its path fits a Unix socket's, even
// when its folder's path nearly fills it; a longer one is refused,
// naming it.
func TestSocketPathBounds(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, strings.Repeat("d", maxSocketPath-len(base)-len("/")-tempSocket-1))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SocketName)
	ln, err := ListenSocket(path)
	if err != nil {
		t.Fatalf("a folder of %d bytes: %v", len(dir), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("the socket: %v, %v; want a socket, 0600", fi, err)
	}
	ln.Close()
	long := filepath.Join(dir, "xx", SocketName)
	if _, err := ListenSocket(long); err == nil || !strings.Contains(err.Error(), long) {
		t.Errorf("a path too long: %v, want an error naming it", err)
	}
}
