package pickle

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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

// TestFlatSharedListStaysUnchanged: the flat path hands out one list for every
// empty frames list, memo slots included. A pickle that reads such a slot
// back outside a flat dict and appends to it must change its own copy, never
// the shared list that later entries get.
func TestFlatSharedListStaysUnchanged(t *testing.T) {
	entry := func(memoFrames bool) string { // a trace entry: keys and 'alloc' read from slots 3, 4, 5
		s := "}\x94(h\x03h\x04h\x05]"
		if memoFrames {
			s += "\x94"
		}
		return s + "u"
	}
	b := []byte("\x80\x04]\x94(" + // root list, slot 0; MARK
		"]\x94(}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x06frames\x94]\x94ue" + // trace (slot 1): one entry, built the slow way
		"(" + entry(true) + entry(false) + "e" + // flat: frames in slot 8, read back below; then an unstored []
		"h\x08K\x05a" + // slot 8's list on the stack, 5 appended to it
		"h\x01(" + entry(false) + "e" + // the trace again: one more flat entry with []
		"\x8c\x14" + strings.Repeat("x", 20) + "e.")
	plan, err := Scan(bytesReader(b), int64(len(b)), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMachine(bytesReader(b), int64(len(b)), plan, DefaultLimits)
	m.OnAppend = func(l *List, items []Value) (bool, error) {
		if len(items) > 0 && items[0].Kind == DictKind {
			l.Tag = "trace"
		}
		return false, nil
	}
	var frames []any
	m.OnFlatDict = func(l *List, keys []string, vals []Value) error {
		frames = append(frames, vals[1].Plain()) // as it is now: a callee keeps no list
		return nil
	}
	root, err := m.Run()
	if err != nil {
		t.Fatal(err)
	}
	if d := plainDiff("", frames, []any{[]any{}, []any{}, []any{}}); d != "" {
		t.Errorf("frames of the flat entries: %s", d)
	}
	items, _ := root.Items()
	if len(items) != 4 {
		t.Fatalf("root has %d items", len(items))
	}
	if d := plainDiff("", items[1].Plain(), []any{int64(5)}); d != "" {
		t.Errorf("the list appended to: %s", d)
	}
	if len(emptyList.Items) != 0 || emptyList.Count != 0 {
		t.Errorf("the shared empty list changed: %+v", *emptyList)
	}
}
