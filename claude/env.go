package claude

import "strings"

// keptClaudeCodeVars are CLAUDE_CODE_* variables an operator sets on
// purpose to choose a provider, authenticate or quiet the CLI. Every other
// CLAUDE_CODE_* variable, and CLAUDECODE, is what a running Claude Code
// session sets for its own children (CLAUDECODE=1, CLAUDE_CODE_ENTRYPOINT,
// CLAUDE_CODE_SSE_PORT...): inherited by accident when brainbot is started
// from inside one, they would change how our CLI behaves.
var keptClaudeCodeVars = map[string]bool{
	"CLAUDE_CODE_USE_BEDROCK":                  true,
	"CLAUDE_CODE_USE_VERTEX":                   true,
	"CLAUDE_CODE_USE_FOUNDRY":                  true,
	"CLAUDE_CODE_SKIP_BEDROCK_AUTH":            true,
	"CLAUDE_CODE_SKIP_VERTEX_AUTH":             true,
	"CLAUDE_CODE_OAUTH_TOKEN":                  true,
	"CLAUDE_CODE_API_KEY_HELPER_TTL_MS":        true,
	"CLAUDE_CODE_CLIENT_CERT":                  true,
	"CLAUDE_CODE_CLIENT_KEY":                   true,
	"CLAUDE_CODE_CLIENT_KEY_PASSPHRASE":        true,
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": true,
	"CLAUDE_CODE_MAX_OUTPUT_TOKENS":            true,
}

// cliEnv builds the CLI's environment: the parent's minus accidental
// Claude Code variables (see keptClaudeCodeVars), then the variables the
// driver needs, then extra. Later entries win (os/exec keeps the last of
// duplicate keys), so Config.Env can deliberately set anything. The CLI
// hands its environment on to our stdio MCP servers, which is how they get
// BRAINBOT_DATA and the OpenAI settings without secrets in mcp.json.
func cliEnv(parent []string, dataDir string, extra []string) []string {
	env := make([]string, 0, len(parent)+2+len(extra))
	for _, kv := range parent {
		name, _, _ := strings.Cut(kv, "=")
		if name == "CLAUDECODE" || strings.HasPrefix(name, "CLAUDE_CODE_") && !keptClaudeCodeVars[name] {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		// With few tools the CLI would still hide MCP tools behind a
		// ToolSearch round trip unless told not to.
		"ENABLE_TOOL_SEARCH=false",
		"BRAINBOT_DATA="+dataDir,
	)
	return append(env, extra...)
}
