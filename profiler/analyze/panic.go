package analyze

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a panic inside an analysis, recovered and returned as the
// analysis's error: a long-running process (the daemon, the language
// server) answers the request with it and goes on. Stack is where it
// happened, for the caller's log; the message leaves it out.
type PanicError struct {
	Value any
	Stack []byte
}

func newPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

func (e *PanicError) Error() string {
	return fmt.Sprintf("internal error analysing the snapshot: %v (please report it, with the file if you can)", e.Value)
}

// recovered turns a panic on the caller's goroutine into *err, naming the
// file; it is deferred by run.
func recovered(name string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: %w", name, newPanicError(r))
	}
}
