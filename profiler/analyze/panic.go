package analyze

import (
	"errors"
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

// Guard runs fn, which analyses file or works on its result, turning a
// panic into an error naming the file: the daemon's and the language
// server's goroutines that handle snapshots run their work through it.
func Guard(file string, fn func() error) (err error) {
	defer recovered(file, &err)
	return fn()
}

// LogPanic writes err with the stack of the panic it wraps, when it wraps a
// *PanicError, with logf; the message names the file.
func LogPanic(logf func(format string, args ...any), err error) {
	var pe *PanicError
	if errors.As(err, &pe) {
		logf("%v\n%s", err, pe.Stack)
	}
}
