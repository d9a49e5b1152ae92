package marshal

import (
	"bytes"
	"fmt"
	"github.com/vramscope/vramscope/internal/reftool"
	"github.com/vramscope/vramscope/internal/vsmtest"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The snapshots the repository ships, and the shared real ones when present.
var (
	exampleDir = filepath.Join("..", "..", "examples", "snapshots")
	fixtureDir = filepath.Join("..", "..", "..", "shared", "fixtures", "snapshots")
	jupyterDir = filepath.Join("..", "..", "jupyter")
)

func snapshotPickles(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, pat := range []string{
		filepath.Join(exampleDir, "*.pickle"),
		filepath.Join(exampleDir, "findings", "*.pickle"),
		filepath.Join(fixtureDir, "*.pickle"), // absent on machines without the shared fixtures
	} {
		m, _ := filepath.Glob(pat)
		paths = append(paths, m...)
	}
	if len(paths) < 10 {
		t.Fatalf("only %d example snapshots found", len(paths))
	}
	return paths
}

// pyCompare loads each pair (the original, Transcode's pickle) and reports
// the first difference. An original ending in .vsm is read with read_vsm.
const pyCompare = `
import pickle, sys
sys.path.insert(0, sys.argv[1])
from vramscope.agent._vsm import read_vsm
def first_diff(a, b, path="snapshot"):
    if type(a) is not type(b):
        return "%s: %s vs %s" % (path, type(a).__name__, type(b).__name__)
    if isinstance(a, dict):
        if list(sorted(map(repr, a))) != list(sorted(map(repr, b))):
            return "%s: keys %s vs %s" % (path, sorted(map(repr, a)), sorted(map(repr, b)))
        for k in a:
            d = first_diff(a[k], b[k], "%s[%r]" % (path, k))
            if d: return d
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return "%s: %d vs %d items" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, "%s[%d]" % (path, i))
            if d: return d
    elif a != b:
        return "%s: %r vs %r" % (path, a, b)
    return None
args, bad = sys.argv[2:], 0
for orig, out in zip(args[0::2], args[1::2]):
    with open(orig, "rb") as f:
        a = read_vsm(f) if orig.endswith(".vsm") else pickle.load(f)
    with open(out, "rb") as f:
        b = pickle.load(f)
    if a != b:
        bad += 1
        print("%s: %s" % (orig, first_diff(a, b)))
sys.exit(1 if bad else 0)
`

func python(t *testing.T, script string, args ...string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		reftool.Missing(t, "python3 not found")
	}
	cmd := exec.Command(py, append([]string{"-c", script, jupyterDir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
}

// writeVSMs has Python write every example snapshot as VSM1 under dir, 1000
// entries a chunk so there are many chunks.
func writeVSMs(t *testing.T, dir string, pickles []string) []string {
	t.Helper()
	return vsmtest.Write(t, jupyterDir, dir, pickles, 1000)
}

func transcodeFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := Transcode(in, out); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCrossCheckPython: every example snapshot, written as VSM1 by the
// Python writer and transcoded here, loads in Python's pickle as a dict equal
// to the original; so do the testdata streams (against Python's read_vsm).
func TestCrossCheckPython(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3 on every example snapshot")
	}
	dir := t.TempDir()
	pickles := snapshotPickles(t)
	vsms := writeVSMs(t, dir, pickles)
	var pairs []string
	for i, v := range vsms {
		out := strings.TrimSuffix(v, ".vsm") + ".pickle"
		transcodeFile(t, v, out)
		pairs = append(pairs, pickles[i], out)
	}
	for _, name := range []string{"small.vsm", "values.vsm", "no_traces.vsm"} {
		out := filepath.Join(dir, name+".pickle")
		transcodeFile(t, filepath.Join("testdata", name), out)
		pairs = append(pairs, filepath.Join("testdata", name), out)
	}
	python(t, pyCompare, pairs...)

	// A large example, cut at random offsets: an error, never a panic.
	big, err := os.ReadFile(vsms[0])
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 40; i++ {
		n := rng.Intn(len(big))
		checkTruncated(t, fmt.Sprintf("%s cut at %d", vsms[0], n), big[:n])
	}
	if err := Transcode(bytes.NewReader(big), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
}
