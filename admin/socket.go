package admin

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// SocketName is the admin socket's file in the data folder, unless
// BRAINBOT_ADMIN_SOCKET names another.
const SocketName = "admin.sock"

// maxSocketPath is the longest path a Unix socket can have on Linux
// (sun_path holds 108 bytes with the closing NUL).
const maxSocketPath = 107

// tempSocket is the longest the name of the folder a socket is made in
// and its own name add to its folder's path: "/.s" and MkdirTemp's up to
// ten digits, then "/s".
const tempSocket = len("/.s") + 10 + len("/s")

// ListenSocket listens on the admin socket at path, a file only this
// process's user (and root) may open. A socket left by a brainbot that
// was killed is replaced; one that answers is another brainbot's, and is
// refused.
func ListenSocket(path string) (net.Listener, error) {
	// Bound in a folder of its own (0700) and moved into place once it is
	// 0600: at no moment can another account open it. Both names are
	// short: a socket's path is bounded.
	if n := len(filepath.Dir(path)) + tempSocket; len(path) > maxSocketPath || n > maxSocketPath {
		return nil, fmt.Errorf("%s is too long for a Unix socket (%d bytes at most, %d while it is made): choose a shorter path", path, maxSocketPath, n)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".s")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // it is unlinked at its own path, below
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, err
	}
	return &socketListener{Listener: ln, path: path}, nil
}

// removeStale removes a socket at path that nothing answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket: move it away", path)
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("another brainbot answers at %s: stop it first, or give this one another data folder", path)
	}
	return os.Remove(path)
}

// socketListener removes its file when closed, and names it as its
// address (a Unix listener's own is the path it was bound at).
type socketListener struct {
	net.Listener
	path string
}

func (l *socketListener) Close() error {
	err := l.Listener.Close()
	if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

func (l *socketListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }
