package marshal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler/pickle"
)

// stream builds a VSM1 stream from kind/payload pairs.
func stream(frames ...string) []byte {
	b := []byte(Magic)
	for i := 0; i+1 < len(frames); i += 2 {
		b = append(b, frames[i][0])
		b = binary.LittleEndian.AppendUint64(b, uint64(len(frames[i+1])))
		b = append(b, frames[i+1]...)
	}
	return b
}

// represented is the snapshot a stream stands for, assembled from its frames
// by the Reader: {**H, "device_traces": [...]}.
func represented(t *testing.T, b []byte) pickle.Value {
	t.Helper()
	r := NewReader(bytes.NewReader(b), DefaultLimits)
	var root *pickle.Dict
	var devices []pickle.Value
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch f.Kind {
		case KindHeader:
			root = f.Value.Ref.(*pickle.Dict)
		case KindDevice:
			devices = append(devices, pickle.Value{Kind: pickle.ListKind, Ref: &pickle.List{}})
		case KindChunk:
			l := devices[f.Device].Ref.(*pickle.List)
			l.Items = append(l.Items, f.Value.Ref.(*pickle.List).Items...)
		}
	}
	root.Items = append(root.Items, pickle.Value{Kind: pickle.Str, Text: "device_traces"},
		pickle.Value{Kind: pickle.ListKind, Ref: &pickle.List{Items: devices}})
	return pickle.Value{Kind: pickle.DictKind, Ref: root}
}

// TestTranscode: the pickle Transcode writes holds the snapshot the stream
// stands for, with its shared objects still shared.
func TestTranscode(t *testing.T) {
	for _, name := range []string{"small.vsm", "values.vsm", "no_traces.vsm"} {
		b := readTestdata(t, name)
		var out bytes.Buffer
		if err := Transcode(bytes.NewReader(b), &out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := pickle.Decode(out.Bytes(), pickle.DefaultLimits)
		if err != nil {
			t.Fatalf("%s: the transcoded pickle does not decode: %v", name, err)
		}
		want := represented(t, b)
		if !reflect.DeepEqual(got.Plain(), want.Plain()) {
			t.Errorf("%s: transcoded\n%s\nwant\n%s", name, dump(got), dump(want))
		}
		if name == "small.vsm" && !strings.Contains(dump(got), `"frames": &1 [`) {
			t.Errorf("%s: the segment's shared stack is no longer shared:\n%s", name, dump(got))
		}
	}
	err := Transcode(bytes.NewReader(readTestdata(t, "frozenset.vsm")), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "frozenset") {
		t.Errorf("a frozenset: %v, want a refusal", err)
	}
}

// TestTruncated: a stream cut anywhere is an *Error that says it is
// truncated, at or before the cut; never a panic, never a snapshot.
func TestTruncated(t *testing.T) {
	for _, name := range []string{"small.vsm", "values.vsm"} {
		b := readTestdata(t, name)
		for n := 0; n < len(b); n++ {
			checkTruncated(t, fmt.Sprintf("%s cut at %d", name, n), b[:n])
		}
	}
}

func checkTruncated(t *testing.T, what string, b []byte) {
	t.Helper()
	err := Transcode(bytes.NewReader(b), io.Discard)
	var me *Error
	if !errors.As(err, &me) {
		t.Fatalf("%s: Transcode = %v, want an *Error", what, err)
	}
	if !strings.Contains(err.Error(), "truncated") || me.Offset > int64(len(b)) {
		t.Fatalf("%s: %v", what, err)
	}
	r := NewReader(bytes.NewReader(b), DefaultLimits)
	var buf []byte
	for err == nil || err == io.EOF {
		var f Frame
		if f, buf, err = r.NextPayload(buf); err == io.EOF {
			t.Fatalf("%s: NextPayload reached the end of a truncated stream", what)
		}
		if err == nil && f.Kind == KindChunk {
			if err := NewDecoder(DefaultLimits).DecodeEntries(buf, f.PayloadAt(), func(pickle.Value, []string, []pickle.Value) error { return nil }); err != nil {
				t.Fatalf("%s: a chunk read whole does not decode: %v", what, err)
			}
		}
	}
	if !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("%s: NextPayload: %v", what, err)
	}
}

// TestTruncatedRandom cuts a stream of many chunks at random offsets.
func TestTruncatedRandom(t *testing.T) {
	chunk := "[\x03\x00\x00\x00" + "\xfb\xda\x06actionz\x05alloc0" + "\xfbr\x01\x00\x00\x00z\x04free0" + "{r\x01\x00\x00\x00N0"
	var frames []string
	frames = append(frames, "H", "{0", "D", "")
	for i := 0; i < 200; i++ {
		frames = append(frames, "C", chunk)
	}
	b := stream(append(frames, "Z", "")...)
	if err := Transcode(bytes.NewReader(b), io.Discard); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		n := rng.Intn(len(b))
		checkTruncated(t, fmt.Sprintf("cut at %d", n), b[:n])
	}
}

// TestStreamErrors: a stream that is not VSM1 or has its frames out of
// order says so, at the frame's offset.
func TestStreamErrors(t *testing.T) {
	h := "{0"
	cases := []struct {
		name string
		in   []byte
		msg  string
		at   int64
	}{
		{"pickle", []byte("\x80\x04\x95"), `not a VSM1 stream: it starts with "\x80\x04\x95"`, 0},
		{"VSM2", []byte("VSM2\x00"), `unsupported VSM version "VSM2"`, 0},
		{"magic only", []byte("VS"), "not even the magic", 2},
		{"no header", stream("D", "", "Z", ""), `frame 'D': before the header frame 'H'`, 4},
		{"two headers", stream("H", h, "H", h, "Z", ""), "a second header", 15},
		{"chunk before a device", stream("H", h, "C", "[\x00\x00\x00\x00", "Z", ""), "before the first device frame", 15},
		{"device with a payload", stream("H", h, "D", "N", "Z", ""), "payload of 1 bytes, want none", 15},
		{"unknown kind", stream("H", h, "X", "", "Z", ""), "unknown frame kind 0x58", 15},
		{"header not a dict", stream("H", "N", "Z", ""), "holds a None, want a dict", 4},
		{"chunk not a list", stream("H", h, "D", "", "C", "N", "Z", ""), "holds a None, want a list", 24},
		{"huge length", append([]byte("VSM1H"), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), "exceeds the limit", 4},
		{"bad payload", stream("H", "{N", "Z", ""), "marshal: the payload ends where a value should start", 15},
	}
	for _, c := range cases {
		err := Transcode(bytes.NewReader(c.in), io.Discard)
		var me *Error
		if !errors.As(err, &me) || !strings.Contains(err.Error(), c.msg) || me.Offset != c.at {
			t.Errorf("%s: %v, want %q at byte %d", c.name, err, c.msg, c.at)
		}
	}
}

// TestLengthNotAllocated: a length field the stream does not back allocates
// nothing of that size.
func TestLengthNotAllocated(t *testing.T) {
	b := append([]byte("VSM1H"), binary.LittleEndian.AppendUint64(nil, 1<<29)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := Transcode(bytes.NewReader(append(b, "{0"...)), io.Discard)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("err = %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("a 512 MiB length field backed by 2 bytes allocated %d MiB", n>>20)
	}
}

// TestDecodeEntries: items streamed by DecodeEntries are the items Decode
// finds, also when an entry is referred to again (the whole-tree fallback),
// and an error from each stops it.
func TestDecodeEntries(t *testing.T) {
	entry := func(i int) string { return "\xfb\xda\x01ai" + u32(i) + "\xda\x01b[\x01\x00\x00\x00i" + u32(i) + "0" }
	var plain, again strings.Builder
	plain.WriteString("[" + u32(3000))
	again.WriteString("[" + u32(3000))
	for i := 0; i < 3000; i++ {
		plain.WriteString(entry(i))
		if i == 2500 {
			again.WriteString("r\x00\x00\x00\x00") // entry 0 again: the fallback
		} else {
			again.WriteString(entry(i))
		}
	}
	for _, in := range []string{plain.String(), again.String()} {
		d := NewDecoder(DefaultLimits)
		tree, err := d.Decode([]byte(in), 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []any
		err = d.DecodeEntries([]byte(in), 0, func(it pickle.Value, keys []string, vals []pickle.Value) error {
			got = append(got, flatItem(it, keys, vals).Plain())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := tree.Plain(); !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeEntries items differ from Decode's")
		}
	}
	stop := errors.New("stop")
	n := 0
	err := NewDecoder(DefaultLimits).DecodeEntries([]byte(plain.String()), 0, func(pickle.Value, []string, []pickle.Value) error {
		if n++; n == 1500 {
			return stop
		}
		return nil
	})
	if err != stop || n != 1500 {
		t.Errorf("each's error: %v after %d items", err, n)
	}
}

// TestDecodeEntriesInline: the codes DecodeEntries reads inline (references,
// ints, longs, short strings, empty lists, None) and what looks like them but
// is not well formed come out as Decode reads them, or fail as Decode fails.
func TestDecodeEntriesInline(t *testing.T) {
	long := func(digits ...int) string {
		s := "l" + u32(len(digits))
		for _, dg := range digits {
			s += string([]byte{byte(dg), byte(dg >> 8)})
		}
		return s
	}
	neg := func(l string) string { return "l" + u32(-int(l[1])) + l[5:] }
	key := "\xda\x01k"         // slot 0
	ref := "r\x00\x00\x00\x00" // the key again
	entry := func(v string) string { return "{" + ref + v + "0" }
	values := []string{
		long(1), long(0x7fff), long(1, 2), long(1, 2, 3), long(0x7fff, 0x7fff, 0x7fff, 0x7fff), neg(long(5, 6, 7, 8)),
		long(1, 2, 3, 4, 5), long(), long(0x8000), long(1, 0), long(0, 0, 0, 0), long(1, 0x8000, 1, 1),
		"\xec" + u32(3) + "\x01\x00\x02\x00\x03\x00", "\xe9" + u32(7), "i" + u32(-1),
		"z\x03N/A", "z\x03N/A", "z\x03N/B", "z\x00", "z\x02\xe9a", "z\x02\xe9a", "\xfa\x02ab", "Z\x01x", "u" + u32(2) + "ab",
		"[" + u32(0), "\xdb" + u32(0), "[" + u32(1) + ref, "\xdb" + u32(2) + ref + ref, "[" + u32(2) + ref + ref,
		"N", "\xce", "T", "F", "r\x01\x00\x00\x00", "r\xff\x00\x00\x00",
	}
	var cases []string
	for _, v := range values {
		cases = append(cases, "{"+key+v+"0")
		cases = append(cases, "{"+key+"N0"+entry(v)+entry(v)+entry("N")+entry(v))
	}
	cases = append(cases,
		"{"+key+"N0"+"{i\x01\x00\x00\x00N"+ref+"N0",                                  // an int key: left out
		"{"+key+"N0"+"{\xda\x01jN"+ref+"N0"+"{r\x03\x00\x00\x00Nr\x00\x00\x00\x00N0", // keys by reference, in a new order
		"{"+key+"N0"+"{[\x00\x00\x00\x00N0",                                          // a list as a key
		"{"+key+"0",                         // a key with no value
		"{"+key+"N",                         // the payload ends in the dict
		"{"+key+"l\x04\x00\x00\x00\x01\x00", // ... in a long
		"{"+key+"r\x00\x00\x00",             // ... in a reference
	)
	for _, c := range cases {
		for _, lim := range []Limits{DefaultLimits, {MaxDepth: 2}} {
			n := strings.Count(c, "{")
			in := []byte("[" + u32(n) + c)
			checkEntries(t, in, lim)
		}
	}
}

// checkEntries compares what DecodeEntries hands out for in with Decode's
// items, and their errors.
func checkEntries(t *testing.T, in []byte, lim Limits) {
	t.Helper()
	tree, werr := NewDecoder(lim).Decode(in, 0)
	var got, want []string
	gerr := NewDecoder(lim).DecodeEntries(in, 0, func(it pickle.Value, keys []string, vals []pickle.Value) error {
		got = append(got, plainDump(flatItem(it, keys, vals)))
		return nil
	})
	if werr == nil {
		for _, it := range tree.Ref.(*pickle.List).Items {
			want = append(want, plainDump(strPairs(it)))
		}
	}
	if fmt.Sprint(gerr) != fmt.Sprint(werr) || (werr == nil && !reflect.DeepEqual(got, want)) {
		t.Errorf("%q (depth %d):\nDecodeEntries %v %v\nDecode        %v %v", in, lim.MaxDepth, got, gerr, want, werr)
	}
}
