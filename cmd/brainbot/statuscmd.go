package main

import (
	"brainbot/admin"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strings"
)

// adminWay says how the admin's commands reach the service.
const adminWay = "On the service's machine it asks through the admin socket (admin.sock in the data folder, BRAINBOT_DATA, or BRAINBOT_ADMIN_SOCKET), " +
	"which root and the service's user may open; from elsewhere, give it the admin address and token (BRAINBOT_HTTP_ADDR, BRAINBOT_ADMIN_TOKEN)."

// status prints what the running service says of its bots (its /status)
// as a table, and fails when a bot does not run as its brain file says:
// an older version running, not started, or its token rejected.
func (m *Main) status(ctx context.Context, args []string) error {
	fs := m.newFlagSet("status", "status [-json] [-data DIR] [-env-file FILE]\n\n"+
		"Asks the running service what each bot does, and prints it. "+adminWay+" "+
		"Exits 1 when a bot does not run as its brain file says (an older version running, not started, its token rejected); "+
		"a bot waiting for a token it was never given is no failure.")
	asJSON := fs.Bool("json", false, "print the service's JSON as it is")
	client, err := m.adminConfig(fs, args)
	if err != nil {
		return err
	}
	body, err := client.Do(ctx, http.MethodGet, "/status", nil)
	if err != nil {
		return err
	}
	var r admin.StatusReport
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("the answer to /status is something else than brainbot's JSON: %w", err)
	}
	if *asJSON {
		_, err = m.Stdout.Write(body)
	} else {
		admin.WriteStatusTable(m.Stdout, r)
	}
	if err != nil {
		return err
	}
	var off []string
	for _, b := range r.Bots {
		if b.Failing() {
			off = append(off, b.ID)
		}
	}
	if len(off) > 0 {
		fmt.Fprintf(m.Stderr, "brainbot status: not running as their brain files say: %s\n", strings.Join(off, ", "))
		return errReported
	}
	return nil
}

// adminConfig reads the settings of a command that asks the running
// service: where its admin socket is (BRAINBOT_DATA or
// BRAINBOT_ADMIN_SOCKET), and for an account or a machine that cannot
// open it, the admin address and token (BRAINBOT_HTTP_ADDR,
// BRAINBOT_ADMIN_TOKEN). It takes no arguments besides the flags.
func (m *Main) adminConfig(fs *flag.FlagSet, args []string) (admin.Client, error) {
	cfg, err := m.loadConfig(fs, args, settingsNamed("BRAINBOT_DATA", "BRAINBOT_ADMIN_SOCKET", "BRAINBOT_HTTP_ADDR"))
	if err != nil {
		return admin.Client{}, usageError{err}
	}
	if fs.NArg() != 0 {
		return admin.Client{}, usageError{fmt.Errorf("want no arguments, got %q", fs.Args())}
	}
	return admin.Client{Socket: cfg.adminSocket(), Addr: cfg.HTTPAddr, Token: cfg.AdminToken}, nil
}
