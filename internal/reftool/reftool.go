// Package reftool lets a test that checks vramscope against a reference tool
// (python3 and its standard library, prometheus, go tool pprof, the shared
// fixtures) skip where the tool is missing, except in CI ($CI set, or
// $VRAMSCOPE_CI=1, which .ci/run exports): there a missing tool is a broken
// install, and the test fails instead of passing unseen.
package reftool

import (
	"fmt"
	"os"
	"testing"
)

// InCI says whether the tests run in CI.
func InCI() bool {
	return os.Getenv("CI") != "" || os.Getenv("VRAMSCOPE_CI") == "1"
}

// Missing skips t, saying which tool is missing and why, or fails it in CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (in CI a reference test fails rather than skip: install it, e.g. make setup)", msg)
	}
	t.Skip(msg)
}
