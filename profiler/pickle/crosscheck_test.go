package pickle

import (
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// fixtureDir is the shared set of real snapshots recorded on an H200.
var fixtureDir = filepath.Join("..", "..", "..", "shared", "fixtures", "snapshots")

// pyJSON is what Python itself decodes, written as JSON with tuples as lists.
const pyJSON = `
import json, pickle, sys
def plain(o):
    if isinstance(o, dict): return {str(k): plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple, set, frozenset)): return [plain(v) for v in o]
    if isinstance(o, bytes): return list(o)
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

// TestCrossCheckPython decodes every shared fixture and compares the result,
// value for value, with CPython's own pickle.load.
func TestCrossCheckPython(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.pickle"))
	if len(files) == 0 {
		t.Fatalf("no fixtures under %s", fixtureDir)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want, err := exec.Command("python3", "-c", pyJSON, path).Output()
			if err != nil {
				t.Fatalf("python3: %v", err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Decode(b, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(goJSON(v.Plain()))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(t, got), normalize(t, want)) {
				t.Fatalf("Go decoding of %s differs from Python's: %s", path, firstDiff("", normalize(t, got), normalize(t, want)))
			}
		})
	}
}
