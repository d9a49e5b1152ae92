// Package vsmtest has the agent's own Python writer (jupyter/vramscope/agent/_vsm.py)
// write real snapshots as VSM1, for the tests of every VSM1 reader.
package vsmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// script writes each pickle given (src dst pairs) as VSM1, argv[2] entries a
// chunk; it skips roots that are not dicts (torch 1.x's bare list of
// segments), which VSM1 does not carry.
const script = `
import pickle, sys
sys.path.insert(0, sys.argv[1])
from vramscope.agent._vsm import write_vsm
chunk, args = int(sys.argv[2]), sys.argv[3:]
for src, dst in zip(args[0::2], args[1::2]):
    with open(src, "rb") as f:
        snap = pickle.load(f)
    if isinstance(snap, dict):
        with open(dst, "wb") as f:
            write_vsm(snap, f, chunk_entries=chunk)
`

// Write writes each of pickles as VSM1 under dir (NN_name.vsm), chunk trace
// entries a frame, and returns the paths in order; a pickle whose root is not
// a dict has no file there. jupyter is the repository's jupyter/ directory.
// Without python3, t is skipped.
func Write(t testing.TB, jupyter, dir string, pickles []string, chunk int) []string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	args := []string{"-c", script, jupyter, fmt.Sprint(chunk)}
	var out []string
	for i, p := range pickles {
		v := filepath.Join(dir, fmt.Sprintf("%02d_%s.vsm", i, strings.TrimSuffix(filepath.Base(p), ".pickle")))
		args = append(args, p, v)
		out = append(out, v)
	}
	if b, err := exec.Command(py, args...).CombinedOutput(); err != nil {
		t.Fatalf("python3: %v\n%s", err, b)
	}
	return out
}

// Bytes is one pickle written as VSM1 by Write, read back.
func Bytes(t testing.TB, jupyter, pickle string, chunk int) []byte {
	t.Helper()
	path := Write(t, jupyter, t.TempDir(), []string{pickle}, chunk)[0]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s was not written as VSM1: %v", pickle, err)
	}
	return b
}
