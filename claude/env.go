package claude

import (
	"path/filepath"
	"slices"
	"strings"
)

// The CLI's environment is an allow-list: brainbot's own holds every bot's
// Telegram token and the OpenAI key, none of which the CLI needs (the
// tools run in brainbot). It gets what any program needs, the network's
// proxy and certificate settings, and the model provider's own variables.
// TMPDIR is the driver's: a folder of each process's own (Driver.spawn);
// HOME and CLAUDE_CONFIG_DIR are the bot's own folders (botDirs).
var (
	allowedEnvNames = []string{
		"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
		"http_proxy", "https_proxy", "no_proxy", "all_proxy",
		"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
		// Vertex AI (Google credentials and region).
		"CLOUD_ML_REGION", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT",
		// Model-side switches an operator may set.
		"DISABLE_PROMPT_CACHING", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "API_TIMEOUT_MS",
		// Bun's idle GC timer (cliEnv).
		"BUN_GC_TIMER_DISABLE", "BUN_GC_TIMER_INTERVAL",
	}
	allowedEnvPrefixes = []string{
		"LC_",
		// The Anthropic API, and Vertex's and Foundry's ANTHROPIC_VERTEX_*
		// and ANTHROPIC_FOUNDRY_*.
		"ANTHROPIC_",
		// Bedrock (credentials, profile, region, bearer token), Foundry's
		// Azure credentials, Vertex's per-model regions.
		"AWS_", "AZURE_", "VERTEX_REGION_",
	}
	// keptClaudeCodeVars are the CLAUDE_CODE_* variables an operator sets
	// on purpose to choose a provider, authenticate or quiet the CLI.
	// Every other one, and CLAUDECODE, is what a running Claude Code
	// session sets for its own children (CLAUDECODE=1,
	// CLAUDE_CODE_ENTRYPOINT, CLAUDE_CODE_SSE_PORT...): inherited by
	// accident when brainbot is started from inside one, they would change
	// how our CLI behaves.
	keptClaudeCodeVars = []string{
		"CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY",
		"CLAUDE_CODE_SKIP_BEDROCK_AUTH", "CLAUDE_CODE_SKIP_VERTEX_AUTH", "CLAUDE_CODE_SKIP_FOUNDRY_AUTH",
		"CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_API_KEY_HELPER_TTL_MS",
		"CLAUDE_CODE_CLIENT_CERT", "CLAUDE_CODE_CLIENT_KEY", "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
	}
)

// allowedEnv reports whether the CLI may inherit the variable name.
func allowedEnv(name string) bool {
	if slices.Contains(allowedEnvNames, name) || slices.Contains(keptClaudeCodeVars, name) {
		return true
	}
	return slices.ContainsFunc(allowedEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// cliEnv builds the CLI's environment: the parent's variables on the
// allow-list (allowedEnv), then the variables the driver needs, then
// extra. Later entries win (os/exec keeps the last of duplicate keys), so
// Config.Env can deliberately set anything.
func cliEnv(parent []string, extra []string) []string {
	env := make([]string, 0, 16+len(extra))
	for _, kv := range parent {
		if name, _, _ := strings.Cut(kv, "="); allowedEnv(name) {
			env = append(env, kv)
		}
	}
	// With few tools the CLI would still hide MCP tools behind a
	// ToolSearch round trip unless told not to.
	env = append(env, "ENABLE_TOOL_SEARCH=false")
	// The CLI is a Bun executable, and Bun's idle GC timer collects for
	// about 0.2 CPU-s after each turn and at every start: more than a turn
	// costs without it. Measured on 2.1.328: a turn 0.11 CPU-s with it,
	// 0.045 without; a spare's start 0.75 against 0.58; for 15 MB more
	// resident (a spare 155 against 170 MB; JSC still collects as the
	// process allocates). Under load the CPU is what answers wait for.
	// An operator's BUN_GC_TIMER_* wins.
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "BUN_GC_TIMER_") }) {
		env = append(env, "BUN_GC_TIMER_DISABLE=1")
	}
	return append(env, extra...)
}

// ServerEnv is the environment a stdio MCP server's launcher (brainbot
// mcp exec, package launch) gets from a CLI, before the server's own env
// entries, when brainbot's is parent: the CLI passes its own on (checked
// on 2.1.328), and the launcher keeps only a minimal base and the server's
// own. brainbot check -connect starts the servers with it, as the CLI
// would.
func ServerEnv(parent []string) []string { return cliEnv(parent, nil) }

// ProbeEnv is the environment of a CLI run only to be asked something (its
// version, its credentials): a bot's CLI's, with home, a new folder, as
// its HOME and config folder, so that it answers as a bot's CLI would.
func ProbeEnv(parent []string, home string) []string {
	return cliEnv(parent, botDirs{home: home, config: filepath.Join(home, ".claude")}.env())
}
