package pickle

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestFlatDictsMatchSlowPath decodes real snapshots twice — once building every
// dict on the stack, once letting trace entries take the flat fast path — and
// requires the same values, in the same order, from both.
func TestFlatDictsMatchSlowPath(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.pickle"))
	more, _ := filepath.Glob(filepath.Join("..", "..", "examples", "snapshots", "*.pickle"))
	files = append(files, more...)
	if len(files) < 4 {
		t.Fatalf("fixtures missing: %v", files)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Decode(b, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := Scan(bytesReader(b), int64(len(b)), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			m := NewMachine(bytesReader(b), int64(len(b)), plan, DefaultLimits)
			flats := 0
			m.OnAppend = func(l *List, items []Value) (bool, error) {
				if len(items) > 0 && items[0].Kind == DictKind {
					if _, ok := items[0].Ref.(*Dict).Get("action"); ok {
						l.Tag = "trace" // claim it: later entries may come flat
					}
				}
				return false, nil
			}
			m.OnFlatDict = func(l *List, keys []string, vals []Value) error {
				flats++
				d := &Dict{}
				for i, k := range keys {
					d.Items = append(d.Items, Value{Kind: Str, Text: k}, vals[i])
				}
				l.Items = append(l.Items, Value{Kind: DictKind, Ref: d})
				return nil
			}
			got, err := m.Run()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Plain(), want.Plain()) {
				t.Fatal("flat decoding differs from the slow path")
			}
			if entries := countEntries(want); entries > 2000 && flats < entries/2 {
				t.Fatalf("only %d of %d trace entries took the flat path", flats, entries)
			}
		})
	}
}

func countEntries(root Value) int {
	d, ok := root.Ref.(*Dict)
	if !ok {
		return 0
	}
	traces, _ := d.Get("device_traces")
	n := 0
	items, _ := traces.Items()
	for _, tr := range items {
		es, _ := tr.Items()
		n += len(es)
	}
	return n
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
