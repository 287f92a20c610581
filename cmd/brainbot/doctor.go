package main

import (
	"context"
	"fmt"
	"io"

	"go.uber.org/zap"
)

// doctor runs the preflight and prints every check with its verdict, for
// an admin setting brainbot up or finding out why a bot is quiet. It fails
// on any failed check, including those of one bot that run would start
// without.
func (m *Main) doctor(ctx context.Context, args []string) error {
	fs := m.newFlagSet("doctor", "doctor [flags]\n\nChecks what brainbot run needs and prints each check: ok, warn or fail. Exits 1 if one fails.\nIt reads run's flags and variables: run it as the service's user, with its environment.")
	cfg, err := m.runConfig(fs, args)
	if err != nil {
		return err
	}
	secrets := newSecretSet(m.Environ)
	r := m.preflight(ctx, cfg, secrets.Add)
	m.checkCapacity(ctx, cfg, r)
	out := secrets.writer(m.Stdout)
	r.print(out)
	fmt.Fprintln(out, r.summary("would run"))
	if r.failed() {
		return errReported
	}
	return nil
}

// print writes one line per check, then one per bot that would not start.
func (r *report) print(w io.Writer) {
	line := func(s status, check, detail string) { fmt.Fprintf(w, "%-4s  %s: %s\n", s, check, detail) }
	for _, f := range r.findings {
		line(f.status, f.check, f.detail)
	}
	for _, b := range r.bots {
		for _, p := range b.invalid {
			line(statusFail, "brain "+b.name, p)
		}
		if !b.running && len(b.invalid) == 0 {
			detail := "not started: " + b.why
			if b.fix != "" {
				detail += ": " + b.fix
			}
			line(statusWarn, botCheck(b.name), detail)
		}
	}
}

// logPreflight logs what the preflight found, and reports whether run may
// start. Bots that will not start are left to the bot manager, which logs
// each as it skips it.
func logPreflight(log *zap.Logger, r *report) bool {
	for _, f := range r.findings {
		fields := []zap.Field{zap.String("check", f.check), zap.String("detail", f.detail)}
		switch f.status {
		case statusOK:
			log.Debug("preflight check passed", fields...)
		case statusWarn:
			log.Warn("preflight check warns", fields...)
		case statusFail:
			log.Error("preflight check failed", fields...)
		}
	}
	if r.refused() {
		log.Error("brainbot not started: fix the failed checks above (brainbot doctor runs them all)")
		return false
	}
	return true
}
