package brain

import (
	"strconv"
	"strings"
	"testing"
)

// TestSecretsWrittenInTheFile: a credential written in a server's env or
// headers is refused; a path, a word, a number or a URL without
// credentials is a setting and passes. Each row is a brain file as an
// author writes it.
func TestSecretsWrittenInTheFile(t *testing.T) {
	tests := []struct {
		where, name, value string
		secret             bool
	}{
		// Settings.
		{"env", "PIDFILE", "/path/to/x.pid", false},
		{"env", "DATA_DIR", "./data/cache", false},
		{"env", "CONFIG", "~/.config/tool.toml", false},
		{"env", "GOOGLE_APPLICATION_CREDENTIALS", "/etc/brainbot/gcp.json", false},
		{"env", "KEY_FILE", "/etc/ssl/private/tool.key", false},
		{"env", "LOG_LEVEL", "debug", false},
		{"env", "TZ", "Europe/Berlin", false},
		{"env", "REGION", "ASIA_PACIFIC", false},
		{"env", "LANGUAGE", "en_US.UTF-8", false},
		{"env", "PORT", "8080", false},
		{"env", "ENABLED", "true", false},
		{"env", "MODE", "read-only search, no writes", false},
		{"env", "GREETING", "Basic settings apply", false},
		{"env", "PROJECT", "123e4567-e89b-12d3-a456-426614174000", false},
		{"env", "BUILD", "release20240101", false},
		{"env", "SERVICE_NAME", "ThisIsMyServiceName", false},
		{"env", "API_URL", "https://api.example.com/v1/search?lang=en&limit=5", false},
		{"env", "API_KEY", "${API_KEY}", false},
		{"headers", "Accept", "application/json", false},
		{"headers", "User-Agent", "brainbot-tools/1.0", false},
		{"headers", "Authorization", "Bearer ${SEARCH_TOKEN}", false},
		// Secrets.
		{"env", "API_KEY", "sk-live-1234", true},
		{"env", "OPENAI", "sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7", true},
		{"env", "ANTHROPIC", "sk-ant-api03-abcdefghijklmnop", true},
		{"env", "GH", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", true},
		{"env", "SLACK", "xoxb-1234-5678-abcdefgh", true},
		{"env", "AWS_ID", "AKIAIOSFODNN7EXAMPLE", true},
		{"env", "SESSION", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", true},
		{"env", "DB_PASSWORD", "hunter2", true},
		{"env", "TOOL_PASSPHRASE", "correct-horse-battery-staple", true},
		{"env", "GITHUB_TOKEN", "abc", true},
		{"env", "UPSTREAM", "0123456789abcdef0123456789abcdef", true},
		{"env", "OPAQUE", "Zx8f2kQ9mP3vL7tR1wY5", true},
		{"env", "DB_URL", "postgres://app:s3cret@db.example/app", true},
		{"env", "FEED", "https://api.example.com/feed?api_key=abc", true},
		{"env", "PREFIX", "${HOST}-sk-live-abcdefgh", true},
		{"headers", "X-Api-Key", "abc123", true},
		{"headers", "Authorization", "Bearer abcdef123456", true},
		{"headers", "Cookie", "session=1", true},
		{"env", "PEM", "-----BEGIN PRIVATE KEY-----", true},
	}
	for _, tt := range tests {
		t.Run(tt.where+" "+tt.name+"="+tt.value, func(t *testing.T) {
			server := "  s:\n    command: tool\n    env:\n      " + tt.name + ": " + strconv.Quote(tt.value) + "\n"
			if tt.where == "headers" {
				server = "  s:\n    type: http\n    url: https://tools.example/mcp\n    headers:\n      " + tt.name + ": " + strconv.Quote(tt.value) + "\n"
			}
			_, err := ParseBytes("t.yaml", []byte(minimal+"mcp_servers:\n"+server+"tools:\n  allow: [mcp__s]\n"))
			refused := err != nil && strings.Contains(err.Error(), "looks like a secret written in the file")
			if refused != tt.secret {
				t.Errorf("refused as a secret: %v, want %v (error: %v)", refused, tt.secret, err)
			}
			if err != nil && !refused {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
}
