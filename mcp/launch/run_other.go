//go:build !linux

package launch

// Run replaces this process with command, as Exec does: without Linux's
// parent-death signal and subreaper, the server's life is its client's
// business.
func Run(environ []string, command string, args, keep []string) error {
	return Exec(environ, command, args, keep)
}
