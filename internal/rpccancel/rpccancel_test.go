package rpccancel

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

func TestCancelEndsOnlyTheNamedRequest(t *testing.T) {
	var r Requests
	a, doneA := r.Track(context.Background(), &jsonrpc2.Request{ID: jsonrpc2.ID{Num: 7}})
	b, doneB := r.Track(context.Background(), &jsonrpc2.Request{ID: jsonrpc2.ID{Str: "7", IsString: true}})
	defer doneB()
	if err := r.Cancel(json.RawMessage(`{"id": 7}`)); err != nil {
		t.Fatal(err)
	}
	if a.Err() == nil || b.Err() != nil {
		t.Fatalf("after cancelling id 7: request 7 %v, request \"7\" %v", a.Err(), b.Err())
	}
	doneA()
	// Answered requests are forgotten: cancelling them again is no error.
	if err := r.Cancel(json.RawMessage(`{"id": 7}`)); err != nil || len(r.running) != 1 {
		t.Fatalf("cancel of an answered request: %v, %d running", err, len(r.running))
	}
	if err := r.Cancel(json.RawMessage(`{"id": [1]}`)); err == nil {
		t.Error("params naming no id: no error")
	}
}

func TestTrackEndsWithTheConnection(t *testing.T) {
	var r Requests
	conn, closeConn := context.WithCancel(context.Background())
	ctx, done := r.Track(conn, &jsonrpc2.Request{ID: jsonrpc2.ID{Num: 1}})
	defer done()
	note, _ := r.Track(conn, &jsonrpc2.Request{Notif: true})
	if note != conn {
		t.Error("a notification got a context of its own")
	}
	closeConn()
	<-ctx.Done()
}
