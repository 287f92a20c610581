package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

const (
	testBotToken  = "123456789:AAF-secret-bot-token_xyz"
	testOpenAIKey = "sk-test-openai-key-0123456789"
)

// A token or key that reaches the logger by any path (message, field,
// wrapped error) is masked in every sink, JSON, console and file alike.
func TestLogsNeverContainSecrets(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			secrets := newSecretSet([]string{"OPENAI_API_KEY=" + testOpenAIKey, "HOME=/root"})
			secrets.Add(testBotToken) // as the bot package does for inline tokens
			file := filepath.Join(t.TempDir(), "brainbot.log")
			var stderr bytes.Buffer
			log, err := newLogger(logSettings{Level: "debug", Format: format, File: file}, &stderr, false, secrets)
			if err != nil {
				t.Fatal(err)
			}
			cause := errors.New("post https://api.telegram.org/bot" + testBotToken + "/getUpdates: timeout")
			log.Error("telegram call failed "+testBotToken, zap.Error(cause),
				zap.String("key", testOpenAIKey), zap.Strings("env", []string{"OPENAI_API_KEY=" + testOpenAIKey}))
			log.Info("harmless", zap.String("home", "/root"))
			_ = log.Sync()

			fileLog, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for name, out := range map[string]string{"stderr": stderr.String(), "file": string(fileLog)} {
				for _, secret := range []string{testBotToken, testOpenAIKey} {
					if strings.Contains(out, secret) {
						t.Errorf("%s log contains secret %q:\n%s", name, secret, out)
					}
				}
				if got := strings.Count(out, mask); got != 4 {
					t.Errorf("%s log: %d masks, want 4 (message, error, key, env):\n%s", name, got, out)
				}
				if !strings.Contains(out, "/root") {
					t.Errorf("%s log lost an ordinary value:\n%s", name, out)
				}
			}
			// The file is JSON whatever the console format is.
			first, _, _ := strings.Cut(string(fileLog), "\n")
			var entry map[string]any
			if err := json.Unmarshal([]byte(first), &entry); err != nil {
				t.Errorf("log file line is not JSON: %v\n%s", err, first)
			}
		})
	}
}

func TestSecretSetIgnoresShortAndNonSecretValues(t *testing.T) {
	s := newSecretSet([]string{"API_KEY=test", "PATH=/usr/local/bin:/usr/bin", "MY_TOKEN=abcdefgh12345"})
	got := string(s.redact([]byte("test /usr/local/bin:/usr/bin abcdefgh12345")))
	if want := "test /usr/local/bin:/usr/bin " + mask; got != want {
		t.Errorf("redact = %q, want %q", got, want)
	}
}

func TestLoggerLevelsAndFormats(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(logSettings{Level: "warn", Format: "json"}, &buf, true, newSecretSet(nil))
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", zap.String("bot", "narrator"))
	var entry struct {
		Level, Msg, Bot string
		Time            string `json:"time"`
	}
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
		t.Fatalf("want one JSON line, got %q: %v", buf.String(), err)
	}
	if entry.Level != "warn" || entry.Msg != "shown" || entry.Bot != "narrator" || entry.Time == "" {
		t.Errorf("entry = %+v", entry)
	}

	// No format on a terminal: console, for people.
	buf.Reset()
	log, _ = newLogger(logSettings{Level: "info"}, &buf, true, newSecretSet(nil))
	log.Info("hello", zap.String("bot", "narrator"))
	if out := buf.String(); strings.HasPrefix(out, "{") || !strings.Contains(out, "hello") {
		t.Errorf("terminal default should be console, got %q", out)
	}
}
