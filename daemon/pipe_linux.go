package daemon

import (
	"os"
	"syscall"
)

// growPipe asks for a 1 MiB pipe buffer (Linux's default ceiling for users),
// so the agent writing a snapshot waits less on the daemon's reads.
func growPipe(f *os.File) {
	const fSetPipeSz = 1031 // F_SETPIPE_SZ
	syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), fSetPipeSz, 1<<20)
}
