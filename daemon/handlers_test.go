package daemon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
)

// TestHandlersAreTyped checks each handler against daemon/api's Methods: it
// decodes the params type the contract names (noParams where none) and
// answers its result type (a pointer to it, or any where the result is one
// of several); notifications answer nothing. Only $/cancelRequest reads its
// own params (a JSON-RPC id). The generated Python and TypeScript types come
// from the same table, so a handler cannot drift from what the clients read.
func TestHandlersAreTyped(t *testing.T) {
	for _, m := range api.Methods {
		h, ok := handlers[m.Name]
		if !ok {
			continue // TestEveryMethodHasAHandler says whether it should have one
		}
		if m.Name == api.CancelRequest {
			if h.params != nil {
				t.Errorf("%s: typed, but its id is JSON-RPC's own", m.Name)
			}
			continue
		}
		wantP := reflect.TypeFor[noParams]()
		if m.Params != nil {
			wantP = reflect.TypeOf(m.Params)
		}
		if h.params != wantP {
			t.Errorf("%s: the handler reads %v, api.Methods says %v (wrap it: typed((*session).x))", m.Name, h.params, wantP)
		}
		var wantR reflect.Type
		switch r := m.Result.(type) {
		case nil:
		case api.OneOf:
			wantR = reflect.TypeFor[any]()
		default:
			wantR = reflect.TypeOf(r)
		}
		if h.result != wantR && (wantR == nil || h.result != reflect.PointerTo(wantR)) {
			t.Errorf("%s: the handler answers %v, api.Methods says %v", m.Name, h.result, wantR)
		}
	}
}

// TestWireError pins the one mapping from the daemon's domain errors to
// JSON-RPC codes: the code follows the wrapped kind, the message is the
// domain's, and an error no kind wraps is an internal one.
func TestWireError(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int64
		msg  string
	}{
		{fail(errNotFound, "no snapshot %q", "x"), api.CodeNotFound, `no snapshot "x"`},
		{fmt.Errorf("group g: %w", fail(errBadSnapshot, "rank 1: bad")), api.CodeBadSnapshot, "group g: rank 1: bad"},
		{fail(errInvalid, "unknown topic %q", "t"), api.CodeInvalidParams, `unknown topic "t"`},
		{errors.New("disk on fire"), api.CodeInternal, "disk on fire"},
		{&jsonrpc2.Error{Code: api.CodeBusy, Message: "busy"}, api.CodeBusy, "busy"},
	} {
		got := wireError(c.err)
		if got.Code != c.code || got.Message != c.msg {
			t.Errorf("wireError(%v) = %d %q, want %d %q", c.err, got.Code, got.Message, c.code, c.msg)
		}
	}
	for _, w := range wireCodes {
		if got := wireError(fail(w.kind, "x")); got.Code != w.code {
			t.Errorf("%v: code %d, want %d", w.kind, got.Code, w.code)
		}
	}
}

// TestTypedHandlerDecodes runs a typed handler on raw params: defaults kept
// for absent members, plain words for a member of the wrong type.
func TestTypedHandlerDecodes(t *testing.T) {
	var got api.SeriesParams
	h := typedFrom(api.SeriesParams{Device: -1}, func(_ *session, _ context.Context, p api.SeriesParams) (api.Empty, error) {
		got = p
		return api.Empty{}, nil
	})
	if _, err := h.serve(nil, context.Background(), []byte(`{"pid": 7}`)); err != nil || got.Device != -1 || got.PID != 7 {
		t.Errorf("got %+v, %v", got, err)
	}
	_, err := h.serve(nil, context.Background(), []byte(`{"pid": "7"}`))
	if re := wireError(err); err == nil || re.Code != api.CodeInvalidParams || re.Message != `invalid params: "pid" must be an integer, not a string` {
		t.Errorf("a string pid: %v", err)
	}
}
