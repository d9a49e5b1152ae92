package transport

import (
	"bufio"
	"fmt"
	"io"

	"github.com/vramscope/vramscope/daemon/api"
)

// A frameError is a message the daemon cannot read: not JSON, or longer than
// its limit. The daemon answers it with code and closes the connection (the
// stream is out of step, or the peer has already sent more than it may).
type frameError struct {
	code int64
	msg  string
}

func (e *frameError) Error() string { return e.msg }

// framer cuts a byte stream into JSON-RPC messages: one JSON object (or array,
// a batch) per message, newlines inside it allowed, the whitespace between
// messages skipped. It counts bytes per message, not per line, and stops
// reading a message once it outgrows the limit, so a peer costs the daemon at
// most the limit's bytes of buffer however it spaces its message.
type framer struct {
	r   *bufio.Reader
	buf []byte
	sc  scanner
}

// next returns the next message, at most limit bytes counting the whitespace
// before it. It returns io.EOF at a clean end between messages.
func (f *framer) next(limit int) ([]byte, error) {
	f.buf, f.sc = f.buf[:0], scanner{}
	n := 0 // bytes of this message consumed, whitespace before it included
	for {
		if _, err := f.r.Peek(1); err != nil {
			if err == io.EOF && n == 0 {
				return nil, io.EOF
			}
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		chunk, _ := f.r.Peek(f.r.Buffered())
		used, done, err := f.sc.feed(chunk)
		if n+used > limit {
			return nil, &frameError{api.CodeTooLarge, fmt.Sprintf("message longer than %d bytes (the limit here): not read further", limit)}
		}
		if err != nil {
			return nil, err
		}
		if f.sc.started {
			f.buf = append(f.buf, chunk[:used]...)
		}
		f.r.Discard(used)
		n += used
		if done {
			return f.buf, nil
		}
	}
}

// scanner finds where one JSON object or array ends: it tracks strings (and
// their escapes) and nesting, nothing else. Whether the bytes are valid JSON
// is the decoder's question, once the message is whole.
type scanner struct {
	started, inStr, esc bool
	depth               int
}

// feed scans b and returns how many of its bytes belong to the message (all
// of them unless the message ends within b) and whether it ended. Leading
// whitespace counts as used but is not part of the message: feed returns
// before the first byte of the message so that the caller keeps only it.
func (s *scanner) feed(b []byte) (int, bool, error) {
	for i, c := range b {
		switch {
		case !s.started:
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			case '{', '[':
				if i > 0 {
					return i, false, nil // the whitespace; the message starts at the next call
				}
				s.started, s.depth = true, 1
			default:
				return i, false, badStart(c, i)
			}
		case s.inStr:
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
			}
		default:
			switch c {
			case '"':
				s.inStr = true
			case '{', '[':
				s.depth++
			case '}', ']':
				if s.depth--; s.depth == 0 {
					return i + 1, true, nil
				}
			}
		}
	}
	return len(b), false, nil
}

// badStart explains a message that does not start with '{': JSON that is not
// an object is an invalid request, anything else is not JSON.
func badStart(c byte, at int) error {
	if c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n' {
		return &frameError{api.CodeInvalidRequest, "a JSON-RPC message is a JSON object; this one starts with " + fmt.Sprintf("%q", c)}
	}
	return &frameError{api.CodeParse, fmt.Sprintf("parse error: %q cannot start a JSON message", c)}
}
