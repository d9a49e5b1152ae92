package transport

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzWireStream: whatever a peer sends, the stream never panics, buffers no
// message past its limit, answers what it does not pass on, and passes on
// only JSON-RPC requests (with their params stashed) and responses.
func FuzzWireStream(f *testing.F) {
	files, _ := filepath.Glob("../testdata/wire/*") // the hostile messages the daemon's tests send
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<12 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w := NewStream(fakeConn{Reader: bytes.NewReader(b)}, func() bool { return len(b)%2 == 0 })
		for i := 0; i < 1000; i++ {
			var m envelope
			if err := w.ReadObject(&m); err != nil {
				return
			}
			if len(w.f.buf) > w.limit() {
				t.Fatalf("buffered %d bytes, limit %d", len(w.f.buf), w.limit())
			}
			if (m.Method == nil) == (m.Result == nil && m.Error == nil) {
				t.Fatalf("passed on %+v", m)
			}
			if m.Method != nil && m.Params != nil {
				raw := json.RawMessage(m.Params)
				w.params.take(&raw)
			}
		}
	})
}

// fakeConn is a connection that reads from a buffer and writes nowhere.
type fakeConn struct {
	io.Reader
	net.Conn // nil: the methods the stream does not use panic
}

func (c fakeConn) Read(b []byte) (int, error)     { return c.Reader.Read(b) }
func (fakeConn) Write(b []byte) (int, error)      { return len(b), nil }
func (fakeConn) Close() error                     { return nil }
func (fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (fakeConn) SetWriteDeadline(time.Time) error { return nil }
