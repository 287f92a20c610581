package jetstream

import (
	"fmt"
	"strconv"
	"strings"
)

// feature is a JetStream feature brainbot relies on and the nats-server
// release that brought it. An older server does not refuse all of them:
// one that predates pinned consumers accepts a consumer asking for a pin
// and ignores it, so two instances would answer one partition. So the
// version is checked before anything is created.
type feature struct {
	what  string
	since [3]int
}

// features are what the stream and consumers of setup.go ask of the
// server, oldest first.
var features = []feature{
	{"stream subject transforms (the updates' partitions)", [3]int{2, 10, 0}},
	{"pinned consumers in priority groups (one instance per partition)", [3]int{2, 11, 0}},
}

// MinServerVersion is the oldest nats-server that has every feature
// brainbot uses.
var MinServerVersion = versionString(features[len(features)-1].since)

// checkServerVersion says what the nats-server of version v lacks, and
// which release brings it (nil: nothing).
func checkServerVersion(v string) error {
	have, err := parseVersion(v)
	if err != nil {
		return fmt.Errorf("nats-server version %q not understood (brainbot needs %s or newer): %w", v, MinServerVersion, err)
	}
	var missing []string
	for _, f := range features {
		if older(have, f.since) {
			missing = append(missing, fmt.Sprintf("%s, since %s", f.what, versionString(f.since)))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("nats-server %s lacks JetStream features brainbot needs: %s; upgrade it to %s or newer",
			v, strings.Join(missing, "; "), MinServerVersion)
	}
	return nil
}

// parseVersion reads major.minor.patch, ignoring a leading v and what
// follows the patch (-beta.1, +build).
func parseVersion(v string) ([3]int, error) {
	var out [3]int
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) != 3 {
		return out, fmt.Errorf("want major.minor.patch")
	}
	parts[2], _, _ = strings.Cut(parts[2], "-")
	parts[2], _, _ = strings.Cut(parts[2], "+")
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, fmt.Errorf("want major.minor.patch")
		}
		out[i] = n
	}
	return out, nil
}

func older(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func versionString(v [3]int) string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }
