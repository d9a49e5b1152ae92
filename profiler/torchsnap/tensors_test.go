package torchsnap_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vramscope/vramscope/internal/vsmtest"
	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/pickle"
	"github.com/vramscope/vramscope/profiler/torchsnap"
)

// writeNamed writes a snapshot with no segments whose "vramscope_tensors"
// has a kv_cache entry with its shape (nine fields, as the agent writes
// them), an entry of an older agent (eight) and one whose shape is not a
// list of ints.
func writeNamed(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pickle.NewWriter(f)
	w.BeginDict()
	w.Key("segments")
	w.BeginList()
	w.EndList()
	w.Key("device_traces")
	w.BeginList()
	w.EndList()
	w.Key("vramscope_tensors")
	w.BeginDict()
	w.Key("version")
	w.Int(1)
	w.Key("entries")
	w.BeginList()
	entry := func(addr int64, name string, shape func()) {
		w.BeginList()
		w.Int(0)
		w.Int(addr)
		w.Int(1 << 20)
		w.Str("kv_cache")
		w.Str(name)
		w.Str("")
		w.Str("")
		w.Int(0)
		if shape != nil {
			shape()
		}
		w.EndList()
	}
	entry(0x1000, "past_key_values.layers[0].keys", func() {
		w.BeginList()
		for _, d := range []int64{2, 8, 512, 64} {
			w.Int(d)
		}
		w.EndList()
	})
	entry(0x2000, "old agent", nil)
	entry(0x3000, "no shape", func() { w.None() })
	entry(0x4000, "not ints", func() {
		w.BeginList()
		w.Str("2")
		w.EndList()
	})
	w.EndList()
	w.EndDict()
	w.EndDict()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTensorShapes: an entry's shape reaches NamedTensor.Shape through both
// ways a snapshot travels, the pickle and the VSM1 stream the agent writes.
func TestTensorShapes(t *testing.T) {
	dir := t.TempDir()
	pk := filepath.Join(dir, "named.pickle")
	writeNamed(t, pk)
	paths := append([]string{pk}, vsmtest.Write(t, filepath.Join("..", "..", "jupyter"), dir, []string{pk}, 1000)...)
	for _, path := range paths {
		snap, err := torchsnap.ReadFile(path, profiler.NewFrames(), func(int, *profiler.Event) error { return nil }, torchsnap.Options{})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if snap.Tensors == nil || len(snap.Tensors.Entries) != 4 {
			t.Fatalf("%s: entries %+v", path, snap.Tensors)
		}
		got := map[string][]int64{}
		for _, e := range snap.Tensors.Entries {
			got[e.Name] = e.Shape
		}
		want := map[string][]int64{"past_key_values.layers[0].keys": {2, 8, 512, 64}, "old agent": nil, "no shape": nil, "not ints": nil}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: shapes %v, want %v", filepath.Base(path), got, want)
		}
	}
}
