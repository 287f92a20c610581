package probe

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"brainbot/bot/brain"
)

// passThrough is a launcher that starts the server itself: it skips the
// launcher's own arguments up to "--", as brainbot's does.
const passThrough = `#!/bin/sh
while [ "$1" != "--" ]; do shift; done
shift
exec "$@"
`

// A server that fails at once has its whole stderr quoted, every time:
// what it wrote just before it exited must not be lost to the transport
// closing its pipe.
func TestAFailedServerHasItsStderrQuoted(t *testing.T) {
	launcher := filepath.Join(t.TempDir(), "launcher")
	if err := os.WriteFile(launcher, []byte(passThrough), 0o755); err != nil {
		t.Fatal(err)
	}
	servers := map[string]brain.MCPServer{
		"noisy": {Command: "/bin/sh", Args: []string{"-c", "echo config file missing >&2; exit 3"}},
	}
	for i := range 30 {
		found := Connect(context.Background(), servers, []string{"PATH=/usr/bin:/bin"}, launcher)
		if len(found) != 1 || found[0].Err == nil {
			t.Fatalf("run %d: %+v, want one failed server", i, found)
		}
		if err := found[0].Err.Error(); !strings.HasSuffix(err, "; its stderr: config file missing") {
			t.Fatalf("run %d: %s, want it to end with the server's stderr", i, err)
		}
	}
}
