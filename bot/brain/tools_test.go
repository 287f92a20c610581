package brain

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// issueExample is the shape issue 16 promises works as written.
const issueExample = minimal + `mcp_servers:
  clock:                    # the server's tools are mcp__clock__<tool>
    command: python3
    args: [/srv/tools/clock.py]
    env: {TZ: "${TZ}"}
tools:
  allow: [mcp__clock__now]
`

func TestParseMCPServers(t *testing.T) {
	b, err := ParseBytes("t.yaml", []byte(issueExample))
	if err != nil {
		t.Fatal(err)
	}
	clock := b.MCPServers["clock"]
	if clock.Type != ServerStdio || clock.Command != "python3" || !slices.Equal(clock.Args, []string{"/srv/tools/clock.py"}) || clock.Env["TZ"] != "${TZ}" {
		t.Errorf("clock = %+v", clock)
	}
	// A brain with tools gets room for a few rounds of calls, and a
	// bound on each call.
	if b.Claude.MaxTurns != defaultToolMaxTurns || b.Tools.Timeout.D() != 30*time.Second {
		t.Errorf("max_turns %d, tools.timeout %v; want the defaults for a brain with tools", b.Claude.MaxTurns, b.Tools.Timeout)
	}
}

// TestParseToolRules: one row per rule of mcp_servers, tools and the
// system prompt's variables, with what `brainbot check` prints.
func TestParseToolRules(t *testing.T) {
	const allowClock = "tools:\n  allow: [mcp__clock]\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{name: "our server's name", yaml: minimal + "mcp_servers:\n  tts:\n    command: say\ntools:\n  allow: [mcp__tts]\n", want: []string{
			`t.yaml:6: mcp_servers.tts: "tts" is the name of brainbot's own tts server; choose another name`,
			"t.yaml:9: tools.allow[0]: mcp__tts is brainbot's own voice or picture tool: the bot calls it when a reply needs it (see tts and image); it cannot be allowed here"}},
		{name: "a name with __", yaml: minimal + "mcp_servers:\n  my__clock:\n    command: clock\n", want: []string{
			"t.yaml:6: mcp_servers.my__clock: a server name uses only letters, digits, - and single _ (its tools are called mcp__<name>__<tool>)"}},
		{name: "a server no entry allows", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\n", want: []string{
			"t.yaml:6: mcp_servers.clock: no entry of tools.allow names this server, so the model could call none of its tools: add mcp__clock (all its tools) or mcp__clock__<tool>"}},
		{name: "not a mapping", yaml: minimal + "mcp_servers: [clock]\n", want: []string{
			"t.yaml:5: mcp_servers: must be a mapping of names to values, got a list"}},
		{name: "a server twice", yaml: minimal + "mcp_servers:\n  clock:\n    command: a\n  clock:\n    command: b\n" + allowClock, want: []string{
			"t.yaml:8: mcp_servers.clock: defined twice (first at line 6)"}},
		{name: "unknown server field", yaml: minimal + "mcp_servers:\n  clock:\n    cmd: clock\n" + allowClock, want: []string{
			"t.yaml:6: mcp_servers.clock.command: is required: the program the CLI starts (a name found in PATH, or an absolute path)",
			"t.yaml:7: mcp_servers.clock.cmd: unknown field; want one of type, command, args, env, url, headers"}},
		{name: "stdio without command", yaml: minimal + "mcp_servers:\n  clock:\n    args: [x]\n" + allowClock, want: []string{
			"t.yaml:6: mcp_servers.clock.command: is required: the program the CLI starts (a name found in PATH, or an absolute path)"}},
		{name: "stdio with url", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\n    url: http://x\n" + allowClock, want: []string{
			"t.yaml:6: mcp_servers.clock: url and headers are for a server with type: http"}},
		{name: "http without url", yaml: minimal + "mcp_servers:\n  clock:\n    type: http\n    url: ftp://x\n" + allowClock, want: []string{
			"t.yaml:8: mcp_servers.clock.url: must be the server's http:// or https:// address"}},
		{name: "http with command", yaml: minimal + "mcp_servers:\n  clock:\n    type: http\n    url: http://x\n    command: clock\n" + allowClock, want: []string{
			"t.yaml:6: mcp_servers.clock: command, args and env are for a server started on stdio (leave out type, or write type: stdio)"}},
		{name: "unknown type", yaml: minimal + "mcp_servers:\n  clock:\n    type: sse\n    url: http://x\n" + allowClock, want: []string{
			`t.yaml:7: mcp_servers.clock.type: must be one of stdio, http; got "sse"`}},
		{name: "a reference on the command line", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\n    args: [--key, \"${KEY}\"]\n" + allowClock, want: []string{
			"t.yaml:8: mcp_servers.clock.args[1]: must not hold ${...}: its value would be on the server's command line, which every local user can read; pass it in env"}},
		{name: "an inline env value", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\n    env:\n      API_KEY: sk-live-1234\n" + allowClock, want: []string{
			`t.yaml:9: mcp_servers.clock.env.API_KEY: looks like a secret written in the file: write a ${VAR} reference to brainbot's environment instead (such as "${API_KEY}", or "Bearer ${API_TOKEN}" for a header)`}},
		{name: "an inline header", yaml: minimal + "mcp_servers:\n  search:\n    type: http\n    url: https://x/mcp\n    headers:\n      X-Api-Key: abc123\n" + "tools:\n  allow: [mcp__search]\n", want: []string{
			`t.yaml:10: mcp_servers.search.headers.X-Api-Key: looks like a secret written in the file: write a ${VAR} reference to brainbot's environment instead (such as "${X_API_KEY}", or "Bearer ${API_TOKEN}" for a header)`}},
		{name: "a broken reference", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\n    env: {TZ: \"${TZ\"}\n" + allowClock, want: []string{
			"t.yaml:8: mcp_servers.clock.env.TZ: holds a ${ that is not a reference: write ${NAME}, NAME being letters, digits and _"}},
		{name: "an env name", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\n    env: {\"MY-TZ\": \"${TZ}\"}\n" + allowClock, want: []string{
			"t.yaml:8: mcp_servers.clock.env.MY-TZ: must be an environment variable name (letters, digits, _)"}},
		{name: "a password in the url", yaml: minimal + "mcp_servers:\n  clock:\n    type: http\n    url: https://me:${PW}@x/mcp\n" + allowClock, want: []string{
			"t.yaml:8: mcp_servers.clock.url: must not hold a user or password: send credentials in headers, as a ${VAR} reference"}},
		{name: "an allow entry of the wrong form", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\ntools:\n  allow: [clock.now, mcp__clock]\n", want: []string{
			`t.yaml:9: tools.allow[0]: must be mcp__<server> (every tool of a server in mcp_servers) or mcp__<server>__<tool>, got "clock.now"`}},
		{name: "an allow entry of no server", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\ntools:\n  allow: [mcp__clock, mcp__weather__today]\n", want: []string{
			`t.yaml:9: tools.allow[1]: names the server "weather", which mcp_servers does not define`}},
		{name: "a tool timeout too short", yaml: minimal + "mcp_servers:\n  clock:\n    command: clock\n" + allowClock + "  timeout: 500ms\n", want: []string{
			"t.yaml:10: tools.timeout: must be between 1s and 10m, got 500ms"}},
		{name: "a tool timeout past claude.timeout", yaml: minimal + "claude:\n  timeout: 20s\nmcp_servers:\n  clock:\n    command: clock\n" + allowClock, want: []string{
			"t.yaml:11: tools.timeout: must be shorter than claude.timeout (20s): the CLI is silent while a tool runs, so claude.timeout would end the request first; got 30s"}},
		{name: "one turn for a brain with tools", yaml: minimal + "claude:\n  max_turns: 1\nmcp_servers:\n  clock:\n    command: clock\n" + allowClock, want: []string{
			"t.yaml:6: claude.max_turns: must be at least 2 when tools.allow lets the model call tools (a call and the answer to its result), got 1"}},

		{name: "an unknown timezone", yaml: minimal + "timezone: Mars/Olympus\n", want: []string{
			`t.yaml:5: timezone: must be an IANA time zone name such as Europe/Berlin, America/New_York or UTC, got "Mars/Olympus"`}},
		{name: "the machine's timezone", yaml: minimal + "timezone: Local\n", want: []string{
			`t.yaml:5: timezone: must be an IANA time zone name such as Europe/Berlin, America/New_York or UTC, got "Local"`}},
		{name: "unknown variables, each on its line", yaml: "name: N\ntelegram:\n  token_env: T\nsystem_prompt: |\n  You are {{bot_name}}.\n  Your mood is {{ mood }}.\n  It is {{date}} {{hour}}.\n", want: []string{
			"t.yaml:6: system_prompt: unknown variable {{mood}}; the system prompt may use {{bot_name}}, {{user_first_name}}, {{user_language}}, {{chat_type}}, {{date}}, {{weekday}}, {{time}}",
			"t.yaml:7: system_prompt: unknown variable {{hour}}; the system prompt may use {{bot_name}}, {{user_first_name}}, {{user_language}}, {{chat_type}}, {{date}}, {{weekday}}, {{time}}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBytes("t.yaml", []byte(tt.yaml))
			if b != nil {
				t.Fatalf("ParseBytes accepted the brain: %+v", b)
			}
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// A secret written in the file is never quoted back: check's output and
// the logs are often shared.
func TestToolErrorsDoNotQuoteSecrets(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	for _, yaml := range []string{
		minimal + "mcp_servers:\n  c:\n    command: c\n    env: {KEY: " + secret + "}\ntools:\n  allow: [mcp__c]\n",
		minimal + "mcp_servers:\n  c:\n    type: http\n    url: https://x\n    headers: {Authorization: \"Bearer " + secret + "\"}\ntools:\n  allow: [mcp__c]\n",
		minimal + "mcp_servers:\n  c:\n    command: c\n    env: {KEY: \"${" + secret + "}\"}\ntools:\n  allow: [mcp__c]\n",
	} {
		_, err := ParseBytes("t.yaml", []byte(yaml))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("error %v: want one that does not quote the value", err)
		}
	}
}

func TestResolveMCPServers(t *testing.T) {
	b, err := ParseBytes("t.yaml", []byte(minimal+`mcp_servers:
  clock:
    command: clock
    args: [--zone]
    env: {TZ: "${TZ}", KEY: "${API_KEY}-${MISSING}"}
  search:
    type: http
    url: https://${HOST}/mcp
    headers: {Authorization: "Bearer ${API_KEY}"}
tools:
  allow: [mcp__clock, mcp__search]
`))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TZ": "Europe/Berlin", "API_KEY": "s3cret", "HOST": "tools.example"}
	servers, unset := b.ResolveMCPServers(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	clock, search := servers["clock"], servers["search"]
	if clock.Env["TZ"] != "Europe/Berlin" || clock.Env["KEY"] != "s3cret-" || !slices.Equal(clock.Args, []string{"--zone"}) {
		t.Errorf("clock resolved to %+v", clock)
	}
	if search.URL != "https://tools.example/mcp" || search.Headers["Authorization"] != "Bearer s3cret" {
		t.Errorf("search resolved to %+v", search)
	}
	if !slices.Equal(unset, []string{"MISSING"}) {
		t.Errorf("unset = %q, want MISSING", unset)
	}
	// The brain itself keeps its references.
	if b.MCPServers["clock"].Env["TZ"] != "${TZ}" {
		t.Error("resolving changed the brain")
	}
}
