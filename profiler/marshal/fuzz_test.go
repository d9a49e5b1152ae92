package marshal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// fuzzLimits keep a fuzzed input's footprint small.
var fuzzLimits = Limits{MaxDepth: 200, MaxPayload: 1 << 20}

// FuzzUnmarshal: Decode never panics; an error is an *Error inside the
// input; a success decodes again to the same value; and a list streamed by
// DecodeEntries hands out the items Decode finds (equal, if not always
// shared alike: equal lists of references are one list).
func FuzzUnmarshal(f *testing.F) {
	bins, _ := filepath.Glob(filepath.Join("testdata", "marshal_v*.bin"))
	for _, p := range bins {
		f.Add(readTestdata(f, filepath.Base(p)))
	}
	for _, s := range []string{
		"[\x02\x00\x00\x00\xfb\xda\x01ai\x01\x00\x00\x000r\x00\x00\x00\x00",
		"[\x02\x00\x00\x00{\xda\x01a[\x02\x00\x00\x00\xe9\x01\x00\x00\x00r\x01\x00\x00\x000{r\x00\x00\x00\x00[\x02\x00\x00\x00r\x01\x00\x00\x00r\x01\x00\x00\x000",
		"\xa9\x02\xa9\x00r\x01\x00\x00\x00",
		"{)\x01{0N0",
		"l\xfb\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00",
		"z\x02\xe9a",
		"f\x051e999",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("decoding %q took over 10s", b)) })
		defer watchdog.Stop()
		d := NewDecoder(fuzzLimits)
		v, err := d.Decode(b, 0)
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || me.Offset < 0 || me.Offset > int64(len(b)) {
				t.Fatalf("error %v is not an *Error inside the input", err)
			}
			return
		}
		again, err := NewDecoder(fuzzLimits).Decode(b, 0)
		if err != nil || dump(again) != dump(v) {
			t.Fatalf("a second decode differs: %v", err)
		}
		if v.Kind != pickle.ListKind {
			return
		}
		i := 0
		items := v.Ref.(*pickle.List).Items
		err = d.DecodeEntries(b, 0, func(it pickle.Value, keys []string, vals []pickle.Value) error {
			got := plainDump(flatItem(it, keys, vals))
			if i >= len(items) || got != plainDump(strPairs(items[i])) {
				return fmt.Errorf("item %d streamed as %s, decoded as %s", i, got, plainDump(strPairs(items[min(i, len(items)-1)])))
			}
			i++
			return nil
		})
		if err != nil || i != len(items) {
			t.Fatalf("DecodeEntries: %v after %d of %d items", err, i, len(items))
		}
	})
}

// FuzzTranscode: Transcode never panics; a stream it accepts becomes a
// pickle that decodes to the snapshot the stream stands for.
func FuzzTranscode(f *testing.F) {
	for _, name := range []string{"small.vsm", "values.vsm", "no_traces.vsm", "frozenset.vsm"} {
		f.Add(readTestdata(f, name))
	}
	f.Add(stream("H", "{0", "D", "", "C", "[\x01\x00\x00\x00N", "Z", ""))
	f.Add(stream("H", "{\xda\x01kr\x00\x00\x00\x000", "Z", ""))
	f.Fuzz(func(t *testing.T, b []byte) {
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("transcoding %q took over 10s", b)) })
		defer watchdog.Stop()
		var out bytes.Buffer
		if err := Transcode(bytes.NewReader(b), &out); err != nil {
			return
		}
		got, err := pickle.Decode(out.Bytes(), pickle.DefaultLimits)
		if err != nil {
			t.Fatalf("the transcoded pickle does not decode: %v", err)
		}
		budget := 1 << 16
		if !same(got, represented(t, b), &budget) {
			t.Fatalf("transcoded\n%s\nwant\n%s", dump(got), dump(represented(t, b)))
		}
	})
}

// same compares two values as Python's == would (sets in order), giving up
// (true) once budget objects were compared: shared objects expand.
func same(a, b pickle.Value, budget *int) bool {
	if *budget--; *budget < 0 {
		return true
	}
	switch {
	case a.Kind == pickle.Float && b.Kind == pickle.Float:
		x, y := math.Float64frombits(uint64(a.Num)), math.Float64frombits(uint64(b.Num))
		return x == y || (x != x && y != y)
	case a.Kind == pickle.BigInt || b.Kind == pickle.BigInt:
		return fmt.Sprint(a.Plain()) == fmt.Sprint(b.Plain())
	case a.Kind != b.Kind:
		return false
	case a.Kind == pickle.DictKind:
		return sameItems(a.Ref.(*pickle.Dict).Items, b.Ref.(*pickle.Dict).Items, budget)
	case a.Kind >= pickle.Tuple:
		x, _ := a.Items()
		y, _ := b.Items()
		return sameItems(x, y, budget)
	}
	return a.Num == b.Num && a.Text == b.Text
}

func sameItems(x, y []pickle.Value, budget *int) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !same(x[i], y[i], budget) {
			return false
		}
	}
	return true
}

// FuzzReader: the Reader, streaming or not, never panics and agrees with
// itself.
func FuzzReader(f *testing.F) {
	f.Add(readTestdata(f, "small.vsm"))
	f.Fuzz(func(t *testing.T, b []byte) {
		watchdog := time.AfterFunc(10*time.Second, func() {
			debug.SetTraceback("all")
			panic(fmt.Sprintf("reading %q took over 10s", b))
		})
		defer watchdog.Stop()
		var frames [2]string
		var failed [2]bool
		for mode := range frames {
			r := NewReader(bytes.NewReader(b), fuzzLimits)
			dec := NewDecoder(fuzzLimits)
			for {
				var f Frame
				var err error
				if mode == 0 {
					f, err = r.Next()
				} else {
					var payload []byte
					if f, payload, err = r.NextPayload(nil); err == nil && f.Kind == KindChunk {
						err = dec.DecodeEntries(payload, f.PayloadAt(), func(it pickle.Value, keys []string, vals []pickle.Value) error {
							frames[1] += fmt.Sprintf("%d %s\n", f.Device, plainDump(flatItem(it, keys, vals)))
							return nil
						})
					} else if err == nil && f.Kind == KindHeader {
						f.Value, err = dec.DecodePayload(f, payload)
					}
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					failed[mode] = true
					break
				}
				if f.Kind == KindChunk && mode == 0 {
					for _, it := range f.Value.Ref.(*pickle.List).Items {
						frames[0] += fmt.Sprintf("%d %s\n", f.Device, plainDump(strPairs(it)))
					}
				} else if f.Kind != KindChunk {
					frames[mode] += fmt.Sprintf("%c %s\n", f.Kind, dump(f.Value))
				}
			}
		}
		if failed[0] != failed[1] {
			t.Fatalf("one mode failed, not the other: %v", failed)
		}
		if !failed[0] && frames[0] != frames[1] {
			t.Fatalf("streamed entries differ:\n%s\nvs\n%s", frames[0], frames[1])
		}
	})
}

// flatItem is what DecodeEntries handed out, as a value: a dict of the keys
// and values, or the item.
func flatItem(it pickle.Value, keys []string, vals []pickle.Value) pickle.Value {
	if it.Kind != pickle.DictKind {
		return it
	}
	m := &pickle.Dict{}
	for i, k := range keys {
		m.Items = append(m.Items, pickle.Value{Kind: pickle.Str, Text: k}, vals[i])
	}
	return pickle.Value{Kind: pickle.DictKind, Ref: m}
}

// strPairs is what DecodeEntries hands out for a decoded item: a dict's pairs
// with string keys, or the item.
func strPairs(it pickle.Value) pickle.Value {
	if it.Kind != pickle.DictKind {
		return it
	}
	m := &pickle.Dict{}
	items := it.Ref.(*pickle.Dict).Items
	for i := 0; i+1 < len(items); i += 2 {
		if items[i].Kind == pickle.Str {
			m.Items = append(m.Items, items[i], items[i+1])
		}
	}
	return pickle.Value{Kind: pickle.DictKind, Ref: m}
}
