package daemon

// handlers.go: how a method's handler is typed (params in, result out) and
// how its errors reach the wire. A handler is a method of session taking the
// method's params type and answering its result type, as daemon/api's
// Methods table says (a test checks each against it):
//
//	func (s *session) snapshotGet(ctx context.Context, p api.IDParams) (api.SnapshotResult, error)
//
// registered in session.go's table as typed((*session).snapshotGet). It
// returns domain errors (fail(errNotFound, …)); wireError maps them to
// JSON-RPC codes, here and nowhere else.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/transport"
)

// handler is one entry of the table: the function that serves the method, and
// the params and result types it was made from (nil: raw params, or no result).
type handler struct {
	serve          func(s *session, ctx context.Context, params json.RawMessage) (any, error)
	params, result reflect.Type
}

// noParams is the params of a method that takes none.
type noParams struct{}

// typed makes the handler of a method whose params are a P and result an R.
func typed[P, R any](f func(*session, context.Context, P) (R, error)) handler {
	var zero P
	return typedFrom(zero, f)
}

// typedFrom is typed for params with defaults: absent members keep initial's.
func typedFrom[P, R any](initial P, f func(*session, context.Context, P) (R, error)) handler {
	return handler{
		serve: func(s *session, ctx context.Context, raw json.RawMessage) (any, error) {
			p := initial
			if err := decode(raw, &p); err != nil {
				return nil, err
			}
			r, err := f(s, ctx, p)
			if err != nil {
				return nil, err
			}
			return r, nil
		},
		params: reflect.TypeFor[P](), result: resultType(reflect.TypeFor[R]()),
	}
}

// notification makes the handler of a notification (it answers nothing).
func notification[P any](f func(*session, context.Context, P) error) handler {
	h := typed(func(s *session, ctx context.Context, p P) (struct{}, error) { return struct{}{}, f(s, ctx, p) })
	h.result = nil
	return h
}

// raw makes the handler of a method that reads its own params ($/cancelRequest,
// whose id is JSON-RPC's, a number or a string).
func raw(f func(*session, context.Context, json.RawMessage) (any, error)) handler {
	return handler{serve: f}
}

// precomputed is a result already encoded as JSON, of type T (a summary the
// store cached): written as it is.
type precomputed[T any] json.RawMessage

// MarshalJSON writes the JSON as it is.
func (p precomputed[T]) MarshalJSON() ([]byte, error) { return p, nil }

func (precomputed[T]) encodes() reflect.Type { return reflect.TypeFor[T]() }

// resultType is the type a result is on the wire (precomputed[T]'s is T's).
func resultType(t reflect.Type) reflect.Type {
	if e, ok := reflect.Zero(t).Interface().(interface{ encodes() reflect.Type }); ok {
		return e.encodes()
	}
	return t
}

// The daemon's domain errors: what went wrong, in its own words. Code that
// serves a request wraps one with fail; wireError gives each its JSON-RPC code.
var (
	errInvalid      = errors.New("invalid params")
	errUnauthorized = errors.New("unauthorized")
	errVersion      = errors.New("incompatible API version")
	errNotFound     = errors.New("not found")
	errNoAgent      = errors.New("no agent attached")
	errAgentFailed  = errors.New("the agent failed")
	errStoreFailed  = errors.New("the store failed")
	errBadSnapshot  = errors.New("not a readable snapshot")
	errBusy         = transport.ErrBusy // the TCP listener's limits (daemon/transport)
	errInternal     = errors.New("internal error")
)

// wireCodes maps each domain error to its JSON-RPC code.
var wireCodes = []struct {
	kind error
	code int64
}{
	{errInvalid, api.CodeInvalidParams},
	{errUnauthorized, api.CodeUnauthorized},
	{errVersion, api.CodeVersion},
	{errNotFound, api.CodeNotFound},
	{errNoAgent, api.CodeNoAgent},
	{errAgentFailed, api.CodeAgentFailed},
	{errStoreFailed, api.CodeStoreFailed},
	{errBadSnapshot, api.CodeBadSnapshot},
	{errBusy, api.CodeBusy},
	{errInternal, api.CodeInternal},
}

// failure is a domain error with its message (the message the client reads).
type failure struct {
	kind error
	msg  string
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.kind }

// fail is an error of kind (errNotFound, …) that says format.
func fail(kind error, format string, args ...any) error {
	return &failure{kind, fmt.Sprintf(format, args...)}
}

// wireError is err as the client reads it: its domain error's code, or
// CodeInternal for an error no domain error wraps (a bug, reported as one).
func wireError(err error) *jsonrpc2.Error {
	var re *jsonrpc2.Error
	if errors.As(err, &re) {
		return re
	}
	for _, w := range wireCodes {
		if errors.Is(err, w.kind) {
			return &jsonrpc2.Error{Code: w.code, Message: err.Error()}
		}
	}
	return &jsonrpc2.Error{Code: api.CodeInternal, Message: err.Error()}
}
