package cli

import (
	"os"
	"time"
)

// FakeTerminal makes progress treat every *os.File as a terminal and read
// the time from clock, until the returned function restores both.
func FakeTerminal(clock func() time.Time) (restore func()) {
	t, n := isTerminal, now
	isTerminal = func(*os.File) bool { return true }
	now = clock
	return func() { isTerminal, now = t, n }
}

// Progress is progress, for tests.
var Progress = progress
