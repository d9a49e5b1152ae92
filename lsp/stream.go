package lsp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/sourcegraph/jsonrpc2"
)

// The base protocol's limits: a header line, the headers of a message, and
// the Content-Length accepted. A didOpen of a 32 MiB file fits.
const (
	maxHeaderLine = 4 << 10
	maxHeaders    = 16
	maxMessage    = 64 << 20
)

// stream is the server's end of the LSP base protocol (headers, a blank
// line, Content-Length bytes of JSON) for jsonrpc2. jsonrpc2's own codec
// read a header line without limit, believed any Content-Length, and decoded
// a request's params into maps and interfaces and encoded them again: a large
// message peaked at about 32 times its size. Here a request's params are kept
// as the raw bytes they arrived as (handed to the request by onRecv), so a
// message costs about twice its size; and the first error that ends the
// stream is kept for Serve to report.
type stream struct {
	r  *bufio.Reader
	wc io.WriteCloser

	wmu sync.Mutex

	mu     sync.Mutex
	err    error            // why reading stopped, unless at the end of the input between messages
	params *json.RawMessage // the params of the request just read, for onRecv
}

func newStream(rwc io.ReadWriteCloser) *stream {
	return &stream{r: bufio.NewReaderSize(rwc, maxHeaderLine), wc: rwc}
}

// WriteObject implements jsonrpc2.ObjectStream.
func (s *stream) WriteObject(obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := fmt.Fprintf(s.wc, "Content-Length: %d\r\n\r\n", len(b)); err != nil {
		return err
	}
	_, err = s.wc.Write(b)
	return err
}

// Close implements jsonrpc2.ObjectStream.
func (s *stream) Close() error { return s.wc.Close() }

// ReadObject implements jsonrpc2.ObjectStream.
func (s *stream) ReadObject(v any) error {
	body, err := s.readMessage()
	if err == nil {
		err = s.decode(body, v)
	}
	if err != nil && err != io.EOF {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
	return err
}

// readErr is why reading stopped early: nil at the end of the input between
// two messages.
func (s *stream) readErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// readMessage reads one message's headers and body. The input ending before
// a message's first byte is io.EOF; anything else that is wrong is an error
// that says what.
func (s *stream) readMessage() ([]byte, error) {
	length := int64(-1)
	for n := 0; ; n++ {
		line, err := s.r.ReadSlice('\n')
		switch {
		case err == io.EOF && n == 0 && len(line) == 0:
			return nil, io.EOF
		case err == bufio.ErrBufferFull:
			return nil, fmt.Errorf("a header line longer than %d bytes", maxHeaderLine)
		case err == io.EOF:
			return nil, fmt.Errorf("the input ends inside the headers of a message")
		case err != nil:
			return nil, err
		case !bytes.HasSuffix(line, []byte("\r\n")):
			return nil, fmt.Errorf(`a header line that ends in \n, not \r\n: %q`, clip(line))
		case n == maxHeaders:
			return nil, fmt.Errorf("more than %d header lines", maxHeaders)
		}
		line = line[:len(line)-2]
		if len(line) == 0 {
			break
		}
		name, value, ok := strings.Cut(string(line), ":")
		if !ok {
			return nil, fmt.Errorf("a header line that is not NAME: VALUE: %q", clip(line))
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("Content-Length %q is not a length", clip([]byte(value)))
			}
			if n > maxMessage {
				return nil, fmt.Errorf("a message of %d bytes (Content-Length) exceeds the limit of %d", n, maxMessage)
			}
			length = n
		}
	}
	if length < 0 {
		return nil, errors.New("a message without a Content-Length header")
	}
	body := make([]byte, length)
	if n, err := io.ReadFull(s.r, body); err != nil {
		return nil, fmt.Errorf("the input ends %d bytes into a message of %d (Content-Length)", n, length)
	}
	return body, nil
}

// decode reads a message into v (jsonrpc2's message type). A request is
// given to jsonrpc2 without its params, which jsonrpc2 would decode into
// maps and encode again; onRecv puts them back into the request, raw.
func (s *stream) decode(body []byte, v any) error {
	var env struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &env) != nil || env.Method == nil || env.Params == nil {
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("a message that is not a JSON-RPC message: %w", err)
		}
		return nil
	}
	head, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id,omitempty"`
		Method  string          `json:"method"`
	}{"2.0", env.ID, *env.Method})
	if err == nil {
		err = json.Unmarshal(head, v)
	}
	if err != nil {
		return fmt.Errorf("a message that is not a JSON-RPC message: %w", err)
	}
	s.mu.Lock()
	s.params = &env.Params
	s.mu.Unlock()
	return nil
}

// onRecv is the jsonrpc2.OnRecv hook: it runs after ReadObject, before the
// request is handled, and gives the request the params decode kept.
func (s *stream) onRecv(req *jsonrpc2.Request, _ *jsonrpc2.Response) {
	s.mu.Lock()
	p := s.params
	s.params = nil
	s.mu.Unlock()
	if req != nil && p != nil {
		req.Params = p
	}
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}
