package daemon

import (
	"os"
	"strconv"
	"strings"
)

// cmdline reads a process's command line from /proc; nil when it cannot.
func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
