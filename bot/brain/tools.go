package brain

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"brainbot/toolspec"
)

// MCPServer is one of the brain's own MCP servers, in the shape of an
// entry of Claude Code's --mcp-config: a program the CLI starts and talks
// to on stdio (Command, Args, Env), or a server over HTTP (Type "http",
// URL, Headers). Env and Headers values, and URL, may hold ${VAR}
// references to brainbot's environment; Resolve replaces them.
type MCPServer struct {
	Type    string            `yaml:"type"` // ServerStdio (default) or ServerHTTP
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
}

// The values of MCPServer.Type.
const (
	ServerStdio = "stdio"
	ServerHTTP  = "http"
)

// Tools says which of the brain's MCP tools the model may call on its own
// and how long one call may take.
type Tools struct {
	// Allow lists mcp__<server> (every tool of a server) and
	// mcp__<server>__<tool> entries, the servers being the brain's own.
	Allow []string `yaml:"allow"`
	// Timeout bounds each call of the brain's tools (default 30s).
	Timeout Duration `yaml:"timeout"`
}

const (
	defaultToolTimeout = 30 * time.Second
	// The CLI ignores a tool timeout under a second.
	minToolTimeout = time.Second
	maxToolTimeout = 10 * time.Minute
	// A turn that uses tools takes a round trip per round of calls and
	// one for the answer; eight leave room for a few rounds and still
	// stop a model that calls tools in a loop.
	defaultToolMaxTurns = 8
)

var (
	// serverName is what a brain's server may be called: its tools are
	// mcp__<name>__<tool>, so "__" would make the name ambiguous.
	serverName = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)
	// toolName is what follows mcp__<server>__ in a tools.allow entry.
	toolName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	// headerName is an HTTP header name (RFC 9110 token).
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// reference is one ${VAR} in a value.
	reference = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// references checks the ${VAR} references in value and returns the names
// they use. The value itself is never quoted in an error: it may be a
// secret.
func references(value string) ([]string, error) {
	if strings.Count(value, "${") != len(reference.FindAllStringIndex(value, -1)) {
		return nil, errors.New("holds a ${ that is not a reference: write ${NAME}, NAME being letters, digits and _")
	}
	var names []string
	for _, m := range reference.FindAllStringSubmatch(value, -1) {
		names = append(names, m[1])
	}
	return names, nil
}

// Resolve returns s with every ${VAR} replaced by the variable's value as
// lookup (os.LookupEnv in production) finds it, and the names of the
// variables that are unset (they become empty). The result holds secrets:
// it is for the CLI's private MCP config and the server's environment
// only, never for a log or a command line.
func (s MCPServer) Resolve(lookup func(string) (string, bool)) (MCPServer, []string) {
	var unset []string
	expand := func(value string) string {
		return reference.ReplaceAllStringFunc(value, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v, ok := lookup(name)
			if !ok && !slices.Contains(unset, name) {
				unset = append(unset, name)
			}
			return v
		})
	}
	expandAll := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = expand(v)
		}
		return out
	}
	r := s
	r.Args = slices.Clone(s.Args)
	r.URL = expand(s.URL)
	r.Env = expandAll(s.Env)
	r.Headers = expandAll(s.Headers)
	return r, unset
}

// ResolveMCPServers resolves every server of the brain (see
// MCPServer.Resolve); unset lists the unset variables once each.
func (b *Brain) ResolveMCPServers(lookup func(string) (string, bool)) (servers map[string]MCPServer, unset []string) {
	if len(b.MCPServers) == 0 {
		return nil, nil
	}
	servers = make(map[string]MCPServer, len(b.MCPServers))
	for _, name := range slices.Sorted(maps.Keys(b.MCPServers)) {
		r, missing := b.MCPServers[name].Resolve(lookup)
		servers[name] = r
		for _, v := range missing {
			if !slices.Contains(unset, v) {
				unset = append(unset, v)
			}
		}
	}
	return servers, unset
}

// validateTools records every rule the brain's servers and tools.allow
// break.
func (d *decoder) validateTools(b *Brain) {
	allowed := map[string]bool{} // servers some tools.allow entry names
	for i, entry := range b.Tools.Allow {
		path := fmt.Sprintf("tools.allow[%d]", i)
		server, tool, ok := toolspec.SplitToolName(entry)
		_, known := b.MCPServers[server]
		switch {
		case !ok || tool != "" && !toolName.MatchString(tool):
			d.reject(path, "must be mcp__<server> (every tool of a server in mcp_servers) or mcp__<server>__<tool>, got %q", entry)
		case toolspec.OurServer(server):
			d.reject(path, "%s is brainbot's own voice or picture tool: the bot calls it when a reply needs it (see tts and image); it cannot be allowed here", entry)
		case !known:
			d.reject(path, "names the server %q, which mcp_servers does not define", server)
		default:
			allowed[server] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b.MCPServers)) {
		d.validateServer(name, b.MCPServers[name], allowed[name])
	}
	if len(b.MCPServers) == 0 {
		return
	}
	switch t := b.Tools.Timeout.D(); {
	case t < minToolTimeout || t > maxToolTimeout:
		d.reject("tools.timeout", "must be between 1s and 10m, got %v", t)
	case t >= b.Claude.Timeout.D():
		d.reject("tools.timeout", "must be shorter than claude.timeout (%v): the CLI is silent while a tool runs, so claude.timeout would end the request first; got %v", b.Claude.Timeout.D(), t)
	}
}

// validateServer records the rules one server breaks; allowed says
// whether tools.allow names it.
func (d *decoder) validateServer(name string, s MCPServer, allowed bool) {
	path := "mcp_servers." + name
	switch {
	case toolspec.OurServer(name):
		d.reject(path, "%q is the name of brainbot's own %s server; choose another name", name, name)
	case !serverName.MatchString(name):
		d.reject(path, "a server name uses only letters, digits, - and single _ (its tools are called mcp__<name>__<tool>)")
	case !allowed:
		d.reject(path, "no entry of tools.allow names this server, so the model could call none of its tools: add mcp__%s (all its tools) or mcp__%s__<tool>", name, name)
	}
	switch s.Type {
	case ServerStdio:
		if strings.TrimSpace(s.Command) == "" {
			d.reject(path+".command", "is required: the program the CLI starts (a name found in PATH, or an absolute path)")
		}
		if s.URL != "" || len(s.Headers) > 0 {
			d.reject(path, "url and headers are for a server with type: http")
		}
	case ServerHTTP:
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			d.reject(path+".url", "must be the server's http:// or https:// address")
		}
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 {
			d.reject(path, "command, args and env are for a server started on stdio (leave out type, or write type: stdio)")
		}
	default:
		d.reject(path+".type", "must be one of stdio, http; got %q", s.Type)
	}
	onCommandLine := append([]string{s.Command}, s.Args...)
	for i, v := range onCommandLine {
		if strings.Contains(v, "${") {
			field := path + ".command"
			if i > 0 {
				field = fmt.Sprintf("%s.args[%d]", path, i-1)
			}
			d.reject(field, "must not hold ${...}: its value would be on the server's command line, which every local user can read; pass it in env")
		}
	}
	if _, err := references(s.URL); err != nil {
		d.reject(path+".url", "%v", err)
	} else if u, err := url.Parse(reference.ReplaceAllString(s.URL, "x")); err == nil && u.User != nil {
		d.reject(path+".url", "must not hold a user or password: send credentials in headers, as a ${VAR} reference")
	}
	d.checkSecrets(path+".env", s.Env, envName, "an environment variable name (letters, digits, _)")
	d.checkSecrets(path+".headers", s.Headers, headerName, "an HTTP header name")
}

// checkSecrets checks the names and values of env or headers: a value
// that looks like a credential (looksSecret) must come by ${VAR}
// reference, as a brain file is often committed; settings may be written
// as they are.
func (d *decoder) checkSecrets(path string, values map[string]string, names *regexp.Regexp, what string) {
	for _, k := range slices.Sorted(maps.Keys(values)) {
		field := path + "." + k
		if !names.MatchString(k) {
			d.reject(field, "must be %s", what)
			continue
		}
		refs, err := references(values[k])
		switch {
		case err != nil:
			d.reject(field, "%v", err)
		case looksSecret(k, reference.ReplaceAllString(values[k], ""), len(refs) > 0):
			d.reject(field, "looks like a secret written in the file: write a ${VAR} reference to brainbot's environment instead (such as \"${%s}\", or \"Bearer ${API_TOKEN}\" for a header)", strings.ToUpper(strings.ReplaceAll(k, "-", "_")))
		}
	}
}
