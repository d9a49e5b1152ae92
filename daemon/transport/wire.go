package transport

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"github.com/vramscope/vramscope/daemon/api"
)

// Stream is the daemon's side of a connection, as jsonrpc2 reads and
// writes it. It reads one message at a time through a framer (bytes per
// message bounded by whether the peer is past hello), checks that it is a JSON-RPC
// request or response, and answers what is not (-32700, -32600, -32009)
// instead of dropping the connection without a word.
//
// jsonrpc2 decodes a request's params into generic values (about 35 bytes of
// heap per byte of a list of small numbers) before re-encoding them. The
// stream therefore hands jsonrpc2 a ticket in place of the params and keeps
// the raw bytes for the handler (Params): a message costs the daemon
// about its own size.
type Stream struct {
	conn   net.Conn
	f      framer
	authed func() bool // whether the peer may send more than a hello
	wmu    sync.Mutex  // replies from the reader and jsonrpc2's writes
	params paramStash

	// Until the peer has proved the token, one request at a time is passed
	// on: jsonrpc2 starts a goroutine per request, and a peer pipelining
	// small requests could otherwise start thousands before the first
	// answer closes its connection. turn holds the request in flight.
	turn      chan struct{}
	done      chan struct{} // closed by Close: a reader waiting for its turn gives up
	closeOnce sync.Once
}

// NewStream reads and writes c; authed says whether the peer is past hello
// (a hello's size limit and one request at a time until it is).
func NewStream(c net.Conn, authed func() bool) *Stream {
	return &Stream{conn: c, f: framer{r: bufio.NewReaderSize(c, 64<<10)}, authed: authed,
		params: paramStash{m: map[uint64]json.RawMessage{}},
		turn:   make(chan struct{}, 1), done: make(chan struct{})}
}

// limit is the most bytes the next message may have: a hello's until the
// peer has proved the token, else the largest any method may send (each
// method's own limit is checked once the message is whole).
func (w *Stream) limit() int {
	if w.authed() {
		return api.MaxRegisterBytes
	}
	return api.MaxHelloBytes
}

// envelope is a JSON-RPC message with its parts left raw.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// ReadObject reads the next message jsonrpc2 should see into v, answering
// those it should not.
func (w *Stream) ReadObject(v any) error {
	for {
		raw, err := w.f.next(w.limit())
		if err != nil {
			var fe *frameError
			if errors.As(err, &fe) {
				w.fail(nil, fe.code, fe.msg)
			}
			return err
		}
		out, err := w.check(raw)
		if errors.Is(err, errAnswered) {
			if w.authed() {
				continue
			}
			w.linger() // before hello, one error and the peer is gone
		}
		if err != nil {
			return err
		}
		if !w.authed() {
			select {
			case w.turn <- struct{}{}:
			case <-w.done:
				return net.ErrClosed
			}
		}
		return json.Unmarshal(out, v)
	}
}

// Params returns (and forgets) the raw params a request's ticket stands for:
// what jsonrpc2 read as the request's params; nil for none.
func (w *Stream) Params(ticket *json.RawMessage) json.RawMessage { return w.params.take(ticket) }

// Conn is the connection the stream reads.
func (w *Stream) Conn() net.Conn { return w.conn }

// Handled ends the turn of a request passed on before hello (see turn); it
// does nothing for one passed on after.
func (w *Stream) Handled() {
	select {
	case <-w.turn:
	default:
	}
}

// errAnswered: the message was answered with an error; after hello the
// stream goes on, before it the connection ends.
var errAnswered = errors.New("answered")

// check decodes one message's envelope and returns what jsonrpc2 is to read.
func (w *Stream) check(raw []byte) ([]byte, error) {
	if raw[0] == '[' {
		return nil, w.answer(nil, api.CodeInvalidRequest, "batches are not supported: send one request per message")
	}
	var e envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			w.fail(nil, api.CodeParse, "parse error: "+err.Error())
			return nil, err
		}
		return nil, w.answer(echo(e.ID), api.CodeInvalidRequest, fmt.Sprintf("invalid request: %q must be a string", te.Field))
	}
	isResponse := e.Result != nil || e.Error != nil
	switch {
	case e.Method != nil && !isResponse:
		return w.request(&e, len(raw))
	case e.Method == nil && isResponse:
		return w.response(raw)
	}
	return nil, w.answer(echo(e.ID), api.CodeInvalidRequest, "invalid request: a message has a method (a request) or a result or error (a response), not both or neither")
}

// request checks a request's id and size, and stashes its params.
func (w *Stream) request(e *envelope, size int) ([]byte, error) {
	id := e.ID
	if string(id) == "null" {
		id = nil // jsonrpc2 reads a null id as a notification; so does the daemon
	}
	if id != nil && !validID(id) {
		return nil, w.answer(nil, api.CodeInvalidRequest, "invalid request: \"id\" must be a string or an integer")
	}
	if max := api.MaxBytes(*e.Method); size > max {
		return nil, w.answer(id, api.CodeTooLarge, fmt.Sprintf("%s: the message is %d bytes; the limit is %d", *e.Method, size, max))
	}
	req := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id,omitempty"`
		Method  string          `json:"method"`
		Params  *uint64         `json:"params,omitempty"`
	}{JSONRPC: "2.0", ID: id, Method: *e.Method}
	if e.Params != nil && string(e.Params) != "null" {
		t := w.params.put(e.Params)
		req.Params = &t
	}
	return json.Marshal(req)
}

// response passes on a reply to one of the daemon's calls (agent.dump's),
// which jsonrpc2 matches to the call. Only a peer past hello may send one, and
// at most MaxMessageBytes: jsonrpc2 decodes results into generic values.
func (w *Stream) response(raw []byte) ([]byte, error) {
	if !w.authed() {
		return nil, w.answer(nil, api.CodeUnauthorized, "call daemon.hello with the token first, not a response")
	}
	if len(raw) > api.MaxMessageBytes {
		return nil, w.answer(nil, api.CodeTooLarge, fmt.Sprintf("a response of %d bytes; the limit is %d", len(raw), api.MaxMessageBytes))
	}
	return raw, nil
}

// echo is id if it may go back in a reply, else nil (a null id).
func echo(id json.RawMessage) json.RawMessage {
	if id != nil && validID(id) {
		return id
	}
	return nil
}

func validID(id json.RawMessage) bool {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return true
	}
	_, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil
}

// answer replies to a message the daemon does not pass on; the stream goes on.
func (w *Stream) answer(id json.RawMessage, code int64, msg string) error {
	w.reply(id, code, msg)
	return errAnswered
}

// fail replies and then closes the connection, from the reader: it shuts
// down its writing side, so the reply arrives before the end, and reads what
// the peer still sends for a moment (at most lingerBytes, discarded), so the
// kernel does not reset the connection over unread bytes, which can drop the
// reply.
func (w *Stream) fail(id json.RawMessage, code int64, msg string) {
	w.reply(id, code, msg)
	w.linger()
}

func (w *Stream) linger() {
	w.closeWrite()
	w.conn.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, w.conn, lingerBytes)
	w.Close()
}

// End tells the peer why and closes the connection, from outside the reader.
func (w *Stream) End(code int64, msg string) {
	w.conn.SetWriteDeadline(time.Now().Add(lingerTime)) // a write the peer does not read must not hold us
	w.reply(nil, code, msg)
	w.closeWrite()
	w.Close()
}

func (w *Stream) closeWrite() {
	if cw, ok := w.conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// How long, and how many bytes, a connection being closed is still read.
const (
	lingerTime  = 200 * time.Millisecond
	lingerBytes = 1 << 20
)

func (w *Stream) reply(id json.RawMessage, code int64, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc2.Error  `json:"error"`
	}{"2.0", id, jsonrpc2.Error{Code: code, Message: msg}})
	w.write(append(b, '\n'))
}

// WriteObject writes one message and a newline.
func (w *Stream) WriteObject(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.write(append(b, '\n'))
}

func (w *Stream) write(b []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_, err := w.conn.Write(b)
	return err
}

// Close closes the connection; a reader waiting for its turn gives up.
func (w *Stream) Close() error {
	w.closeOnce.Do(func() { close(w.done) })
	return w.conn.Close()
}
