//go:build unix

package transport

import "syscall"

// FileLimit is the soft RLIMIT_NOFILE, 0 when unknown.
func FileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
