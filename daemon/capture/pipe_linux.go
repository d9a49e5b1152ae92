package capture

import (
	"os"
	"syscall"
)

// growPipe asks for a 1 MiB pipe buffer (Linux's default ceiling for users),
// so the agent writing a snapshot waits less on the daemon's reads.
func growPipe(f *os.File) {
	const fSetPipeSz = 1031 // F_SETPIPE_SZ
	// Through SyscallConn, not Fd: Fd puts the file in blocking mode, where
	// read deadlines (stream.wait's timeout) no longer work.
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, 1<<20) })
	}
}

// startWriteback starts writing n bytes of f from off to disk without waiting
// (sync_file_range, SYNC_FILE_RANGE_WRITE), so that the fsync at the end of a
// stream finds little left to write. Best effort: errors show at that fsync.
func startWriteback(f *os.File, off, n int64) {
	const syncFileRangeWrite = 2
	syscall.Syscall6(syscall.SYS_SYNC_FILE_RANGE, f.Fd(), uintptr(off), uintptr(n), syncFileRangeWrite, 0, 0)
}
