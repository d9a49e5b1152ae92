package capture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/internal/vsmtest"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// fixtures are the real snapshots shared by the tests (/work/shared).
const fixtures = "../../../shared/fixtures/snapshots/"

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// vsmOfFixture is a real snapshot written as VSM1 by the agent's own writer,
// in chunks as small as the agent's.
func vsmOfFixture(t *testing.T, pickle string) []byte {
	return vsmtest.Bytes(t, mustAbs("../../jupyter"), pickle, 512)
}

// feed opens the stream's FIFO as the agent does and writes b into it in
// pieces of step bytes.
func feed(t *testing.T, s *Stream, b []byte, step int) {
	t.Helper()
	go func() {
		w, err := os.OpenFile(s.fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Errorf("open fifo: %v", err)
			return
		}
		defer w.Close()
		for len(b) > 0 {
			n := min(step, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				t.Errorf("write fifo: %v", err)
				return
			}
			b = b[n:]
		}
	}()
}

// The stream goes whole to the part file, with the hash of every byte, and
// the analysis is the pickle's, however the agent's writes are cut and
// however much follows the end frame (which outlasts the analysis and
// recycles every block many times over).
func TestStreamPumpsToFileAndAnalysis(t *testing.T) {
	pickle := fixtures + "gpt2_12l_python_stacks.pickle"
	vsm := vsmOfFixture(t, pickle)
	want, err := analyze.Run(pickle, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tail := bytes.Repeat([]byte("after the end frame "), (3*streamBlocks*streamBlock)/20)
	for _, tc := range []struct {
		name string
		data []byte
		step int
	}{
		{"whole", vsm, 1 << 20},
		{"small writes", vsm, 777},
		{"bytes after the end frame", append(append([]byte{}, vsm...), tail...), 1 << 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tempStore(t)
			part := st.NewIncoming("x")
			s := OpenStream(st, part)
			if s == nil {
				t.Skip("no FIFOs here")
			}
			feed(t, s, tc.data, tc.step)
			got := <-s.done
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			sum := sha256.Sum256(tc.data)
			if got.Size != int64(len(tc.data)) || got.Sum != hex.EncodeToString(sum[:]) {
				t.Errorf("size %d sum %s, want %d %x", got.Size, got.Sum, len(tc.data), sum)
			}
			onDisk, err := os.ReadFile(part)
			if err != nil || !bytes.Equal(onDisk, tc.data) {
				t.Errorf("part file: %d bytes (err %v), want the %d Streamed", len(onDisk), err, len(tc.data))
			}
			if got.Res.Peak != want.Peak || got.Res.Events != want.Events || len(got.Res.Sites) != len(want.Sites) {
				t.Errorf("analysis: peak %+v events %d sites %d, want %+v %d %d", got.Res.Peak, got.Res.Events,
					len(got.Res.Sites), want.Peak, want.Events, len(want.Sites))
			}
		})
	}
}

// A stream that ends before its end frame is an error naming where, and
// leaves no part file behind.
func TestStreamTruncated(t *testing.T) {
	vsm := vsmOfFixture(t, fixtures+"gpt2_train.pickle")
	st := tempStore(t)
	part := st.NewIncoming("x")
	s := OpenStream(st, part)
	if s == nil {
		t.Skip("no FIFOs here")
	}
	feed(t, s, vsm[:len(vsm)/2], 4096)
	got := <-s.done
	if got.Err == nil || !got.Got {
		t.Fatalf("truncated stream: err %v got %v", got.Err, got.Got)
	}
	if _, err := os.Stat(part); !os.IsNotExist(err) {
		t.Errorf("part file left behind: %v", err)
	}
	t.Log(got.Err)
}

// tempStore is a store in a temporary directory, for a stream's files.
func tempStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "data"), store.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
