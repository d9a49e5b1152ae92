// Package hostile writes the snapshots that broke vramscope, for the tests of
// every layer that reads them. They are generated rather than kept in
// testdata: small to describe, large on disk.
package hostile

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// DeepStack is a snapshot of one trace entry whose stack is depth copies of
// one frame (a memo GET each, 2 bytes a frame), as Python pickles it:
//
//	f = {'name': 'f', 'filename': 'a.py', 'line': 1}
//	pickle.dumps({'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 0,
//	    'size': 512, 'stream': 0, 'time_us': 1, 'frames': [f] * depth}]]}, 4)
//
// 600,000 frames (1.2 MB) overflowed the goroutine stack of every recursive
// walk of the flame tree; 1,000,000 took 4 GB to decode.
func DeepStack(depth int) []byte {
	return traces(func(w *pickle.Writer) {
		w.BeginDict()
		w.Key("action")
		w.Str("alloc")
		for _, kv := range []struct {
			k string
			v int64
		}{{"addr", 0}, {"size", 512}, {"stream", 0}, {"time_us", 1}} {
			w.Key(kv.k)
			w.Int(kv.v)
		}
		w.Key("frames")
		w.BeginList()
		frame := w.BeginDict()
		w.Key("name")
		w.Str("f")
		w.Key("filename")
		w.Str("a.py")
		w.Key("line")
		w.Int(1)
		w.EndDict()
		for i := 1; i < depth; i++ {
			w.Get(frame)
		}
		w.EndList()
		w.EndDict()
	}, nil)
}

// WriteDeepStack writes DeepStack(depth) to a file in a test's temporary
// directory and returns its path.
func WriteDeepStack(t testing.TB, depth int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "deep.pickle")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	bw.Write(DeepStack(depth))
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

type sliceWriter struct{ b *[]byte }

func (s sliceWriter) Write(p []byte) (int, error) {
	*s.b = append(*s.b, p...)
	return len(p), nil
}
