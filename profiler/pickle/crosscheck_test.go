package pickle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fixtureDir is the shared set of real snapshots recorded on an H200.
var fixtureDir = filepath.Join("..", "..", "..", "shared", "fixtures", "snapshots")

// exampleDir holds the snapshots the repository ships.
var exampleDir = filepath.Join("..", "..", "examples", "snapshots")

// pyJSON is what Python itself decodes, written as JSON with tuples as lists.
// It expands shared objects, so it is slow; TestCrossCheckPython uses it only
// to point at the first difference once the digests disagree.
const pyJSON = `
import json, pickle, sys
def plain(o):
    if isinstance(o, dict): return {str(k): plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple, set, frozenset)): return [plain(v) for v in o]
    if isinstance(o, (bytes, bytearray)): return list(o)
    if isinstance(o, float): return {"__float__": o}
    return o
json.dump(plain(pickle.load(open(sys.argv[1], "rb"))), sys.stdout)
`

func normalize(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return floats(v)
}

// floats turns the tagged floats back into float64 so 0.0 and 0 compare equal
// only when both sides hold a float.
func floats(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if f, ok := x["__float__"].(json.Number); ok && len(x) == 1 {
			n, _ := f.Float64()
			return n
		}
		for k, e := range x {
			x[k] = floats(e)
		}
	case []any:
		for i, e := range x {
			x[i] = floats(e)
		}
	}
	return v
}

func goJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = goJSON(e)
		}
	case []any:
		for i, e := range x {
			x[i] = goJSON(e)
		}
	case []byte:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = int(c)
		}
		return out
	case *big.Int:
		return json.Number(x.String())
	case float64:
		return map[string]any{"__float__": x}
	}
	return v
}

// pyDigests runs pyCanon over paths in one python3 process.
func pyDigests(paths []string) (map[string][]string, error) {
	cmd := exec.Command("python3", append([]string{"-c", pyCanon}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("python3: %v\n%s", err, stderr.String())
	}
	res := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 3 {
			return nil, fmt.Errorf("python3: bad line %q", sc.Text())
		}
		res[f[0]] = f[1:]
	}
	if len(res) != len(paths) {
		return nil, fmt.Errorf("python3 answered for %d of %d files:\n%s", len(res), len(paths), out)
	}
	return res, nil
}

type goDigest struct {
	digest       string
	lists, dicts int
	cyclic       bool
	err          error
}

// goDigests decodes every file with Decode, GOMAXPROCS at a time.
func goDigests(paths []string) map[string]goDigest {
	var mu sync.Mutex
	res := map[string]goDigest{}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Add(1)
		go func(p string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var g goDigest
			b, err := os.ReadFile(p)
			if err == nil {
				var v Value
				if v, err = Decode(b, DefaultLimits); err == nil {
					c := newCanon()
					g.digest = c.digest(v)
					g.lists, g.dicts, g.cyclic = c.lists, c.dicts, c.cyclic
				}
			}
			g.err = err
			mu.Lock()
			res[p] = g
			mu.Unlock()
		}(p)
	}
	wg.Wait()
	return res
}

// TestCrossCheckPython decodes every shared fixture, every shipped example and
// every generated opcode case, and compares the whole decoded value with
// CPython's pickle.load through a digest both sides compute (see canon). The
// digest covers every value; it also compares how many distinct lists and
// dicts each side built, so shared objects must stay shared. Python and Go run
// at the same time; only on a mismatch is the slow JSON comparison run to show
// the first differing value.
func TestCrossCheckPython(t *testing.T) {
	t.Parallel()
	var paths []string
	for _, pat := range []string{
		filepath.Join(fixtureDir, "*.pickle"),
		filepath.Join(exampleDir, "*.pickle"),
		filepath.Join("testdata", "cases", "*.pickle"),
	} {
		m, _ := filepath.Glob(pat)
		if len(m) == 0 {
			t.Fatalf("no files match %s", pat)
		}
		paths = append(paths, m...)
	}
	var py map[string][]string
	var pyErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		py, pyErr = pyDigests(paths)
	}()
	g := goDigests(paths)
	<-done
	if pyErr != nil {
		t.Fatal(pyErr)
	}
	for _, p := range paths {
		name := strings.TrimPrefix(p, filepath.Join("..", "..", "..")+string(filepath.Separator))
		want, got := py[p], g[p]
		t.Run(name, func(t *testing.T) {
			if want[0] == "ERROR" {
				t.Fatalf("python3 could not load it: %s", want[1])
			}
			if got.err != nil {
				var pe *Error
				if errors.As(got.err, &pe) && strings.Contains(pe.Msg, "refusing opcode") {
					return // bytes, bytearray and sets in old protocols need GLOBAL: refusing them is right
				}
				t.Fatalf("Go fails where Python succeeds: %v", got.err)
			}
			if got.digest != want[0] {
				why := "(the value is cyclic: no JSON form to compare)"
				if !got.cyclic {
					why = jsonDiff(t, p)
				}
				t.Fatalf("Go decoding differs from Python's: %s", why)
			}
			if strconv.Itoa(got.lists) != want[1] || strconv.Itoa(got.dicts) != want[2] {
				t.Fatalf("Go built %d distinct lists and %d dicts, Python %s and %s: shared objects are not shared alike",
					got.lists, got.dicts, want[1], want[2])
			}
		})
	}
}

// jsonDiff runs the slow full comparison to name the first differing value.
func jsonDiff(t *testing.T, path string) string {
	want, err := exec.Command("python3", "-c", pyJSON, path).Output()
	if err != nil {
		return "(python3 JSON dump failed: " + err.Error() + ")"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	v, err := Decode(b, DefaultLimits)
	if err != nil {
		return err.Error()
	}
	got, err := json.Marshal(goJSON(v.Plain()))
	if err != nil {
		return err.Error()
	}
	a, w := normalize(t, got), normalize(t, want)
	if d := firstDiff("", a, w); d != "" {
		return d
	}
	if !reflect.DeepEqual(a, w) {
		return "values differ (no single differing value found)"
	}
	return "digests differ but the JSON forms agree (tuple/list, set order, float bits, or key types)"
}
