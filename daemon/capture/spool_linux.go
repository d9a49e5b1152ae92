package capture

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessGone says whether the process that spooled a snapshot at timeMS
// (unix milliseconds) as pid has exited: no process has that pid, or the one
// that has it started after the snapshot was spooled (the pid was reused).
// Unknown counts as alive: the snapshot waits for the next scan.
func ProcessGone(pid int, timeMS int64) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	start, ok := processStart(pid)
	// btime has whole seconds: a second of slack keeps the spooler alive.
	return ok && start.After(time.UnixMilli(timeMS).Add(time.Second))
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's start time (100 on
// every Linux architecture Go runs on).
const clockTicks = 100

// processStart is when pid started, from /proc.
func processStart(pid int) (time.Time, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, false
	}
	// Fields after the command (which may hold spaces and parentheses):
	// state is field 3, starttime field 22.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 20 {
		return time.Time{}, false
	}
	ticks, err1 := strconv.ParseInt(f[19], 10, 64)
	boot, err2 := bootTime()
	if err1 != nil || err2 != nil {
		return time.Time{}, false
	}
	return boot.Add(time.Duration(ticks) * time.Second / clockTicks), true
}

// bootTime is btime of /proc/stat.
func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(n, 0), err
		}
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
}

// linkCount is the number of names of the file fi describes.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
