package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

// logSettings is the part of the configuration the logger needs; the MCP
// subcommands build a logger too, without the rest of Config.
type logSettings struct {
	Level  string
	Format string // json, console, or "" for console on a terminal
	File   string
}

// newLogger builds the process logger: JSON lines for machines, console
// for people, optionally also a rotated JSON file. Every byte passes
// through secrets, so a token or key that slips into a message or an error
// is masked before it is written. Sampling is off: request summaries are
// the admin's record and must not be dropped.
func newLogger(s logSettings, stderr io.Writer, terminal bool, secrets *secretSet) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(s.Level)
	if err != nil {
		return nil, err
	}
	format := s.Format
	if format == "" {
		format = "json"
		if terminal {
			format = "console"
		}
	}
	var enc zapcore.Encoder
	if format == "console" {
		cfg := zap.NewDevelopmentEncoderConfig()
		if terminal {
			cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		enc = zapcore.NewConsoleEncoder(cfg)
	} else {
		enc = zapcore.NewJSONEncoder(jsonEncoderConfig())
	}
	cores := []zapcore.Core{
		zapcore.NewCore(enc, zapcore.AddSync(secrets.writer(stderr)), level),
	}
	if s.File != "" {
		file := &lumberjack.Logger{Filename: s.File, MaxSize: 100, MaxBackups: 10, MaxAge: 30, Compress: true}
		cores = append(cores, zapcore.NewCore(zapcore.NewJSONEncoder(jsonEncoderConfig()),
			zapcore.AddSync(secrets.writer(file)), level))
	}
	return zap.New(zapcore.NewTee(cores...), zap.ErrorOutput(zapcore.AddSync(secrets.writer(stderr)))), nil
}

func jsonEncoderConfig() zapcore.EncoderConfig {
	cfg := zap.NewProductionEncoderConfig()
	cfg.TimeKey = "time"
	cfg.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.EncodeDuration = millisEncoder
	return cfg
}

// millisEncoder writes durations as milliseconds with microsecond
// precision: readable, and small steps (a file located in 0.4 ms) are
// not rounded away as zapcore.MillisDurationEncoder would.
func millisEncoder(d time.Duration, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendFloat64(float64(d.Microseconds()) / 1000)
}

// secretSet holds values that must never appear in logs: API keys and bot
// tokens. Bot tokens are added as brains load, so the set grows while the
// process runs.
type secretSet struct {
	mu     sync.RWMutex
	values [][]byte
}

// minSecretLen keeps short, common strings (an empty variable, "test")
// from turning every log line into asterisks.
const minSecretLen = 8

const mask = "[REDACTED]"

// newSecretSet collects secrets from the environment: any variable whose
// name says it holds a token, key, secret or password.
func newSecretSet(environ []string) *secretSet {
	s := &secretSet{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && looksSecret(name) {
			s.Add(value)
		}
	}
	return s
}

func looksSecret(name string) bool {
	name = strings.ToUpper(name)
	for _, word := range []string{"TOKEN", "KEY", "SECRET", "PASSWORD"} {
		if strings.Contains(name, word) {
			return true
		}
	}
	return false
}

// Add registers one more value to mask.
func (s *secretSet) Add(secret string) {
	if len(secret) < minSecretLen {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.values {
		if string(v) == secret {
			return
		}
	}
	s.values = append(s.values, []byte(secret))
}

func (s *secretSet) redact(p []byte) []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.values {
		if bytes.Contains(p, v) {
			p = bytes.ReplaceAll(p, v, []byte(mask))
		}
	}
	return p
}

// writer wraps w so that everything written is redacted first. zap writes
// one whole encoded entry per call, so a secret is never split.
func (s *secretSet) writer(w io.Writer) io.Writer {
	return redactingWriter{s, w}
}

type redactingWriter struct {
	secrets *secretSet
	w       io.Writer
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := r.w.Write(r.secrets.redact(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Sync flushes the underlying writer when it is a file (os.Stderr);
// lumberjack writes straight to its file and has nothing to flush.
func (r redactingWriter) Sync() error {
	if f, ok := r.w.(*os.File); ok {
		return f.Sync()
	}
	return nil
}
