package daemon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/profiler/analyze"
)

// A streamed capture: the agent writes its snapshot as VSM1 (marshal chunks)
// into a FIFO in the incoming directory; the daemon copies it to the
// incoming part file, hashing it, while the engine analyses it, so analysis
// is ready about when the agent finishes writing.

type streamed struct {
	res  *analyze.Result
	size int64
	sum  string
	got  bool // a writer sent at least one byte
	err  error
}

// stream is one FIFO the agent may write to.
type stream struct {
	fifo string
	done chan streamed
}

// openStream makes the FIFO beside part and starts reading it. Without FIFOs
// (another platform, a file system without them) it returns nil: the agent
// then writes a pickle to part.
func openStream(part string) *stream {
	fifo := part + ".fifo"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return nil
	}
	s := &stream{fifo: fifo, done: make(chan streamed, 1)}
	go func() { s.done <- readStream(fifo, part) }()
	return s
}

// close unblocks the reader if no agent opened the FIFO (one that wrote a
// pickle instead, or failed first): it opens the FIFO for writing, which
// succeeds once the reader waits in its open, and closes it (the reader sees
// an empty stream and leaves the part file alone). The FIFO's name goes
// either way (the reader, once open, no longer needs it).
func (s *stream) close() {
	defer os.Remove(s.fifo)
	for i := 0; i < 100; i++ {
		w, err := os.OpenFile(s.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			w.Close()
			return
		}
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readStream(fifo, part string) streamed {
	f, err := os.OpenFile(fifo, os.O_RDONLY, 0) // until a writer opens it
	os.Remove(fifo)
	if err != nil {
		return streamed{err: err}
	}
	defer f.Close()
	growPipe(f)
	var first [4]byte
	n, err := io.ReadFull(f, first[:])
	if n == 0 {
		return streamed{err: errors.New("nothing was written to the stream")}
	}
	if err != nil {
		return streamed{got: true, err: fmt.Errorf("the stream ended after %d bytes", n)}
	}
	out, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		io.Copy(io.Discard, f) // let the agent finish writing
		return streamed{got: true, err: err}
	}
	h := sha256.New()
	cw := &counter{}
	sink := io.MultiWriter(out, h, cw)
	sink.Write(first[:])
	src := io.MultiReader(bytes.NewReader(first[:]), io.TeeReader(f, sink))
	res, aerr := analyze.RunStream(part, src, analyze.Options{})
	if _, err := io.Copy(sink, f); err != nil && aerr == nil { // anything after the end frame, and errors
		aerr = err
	}
	if err := out.Close(); err != nil && aerr == nil {
		aerr = err
	}
	if aerr != nil {
		os.Remove(part)
		return streamed{got: true, err: aerr}
	}
	return streamed{res: res, size: cw.n, sum: hex.EncodeToString(h.Sum(nil)), got: true}
}

type counter struct{ n int64 }

func (c *counter) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }
