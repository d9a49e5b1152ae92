package pickle

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// decodeWith runs the decoding pass over b with plan.
func decodeWith(b []byte, plan *Plan) (Value, error) {
	return NewMachine(bytes.NewReader(b), int64(len(b)), plan, DefaultLimits).Run()
}

// TestScanAtMatchesScan plans every fixture, example and generated case with
// the parallel ScanAt (which splits protocol 4+ pickles at FRAME boundaries)
// and checks that decoding with its plan gives what decoding with Scan's plan
// gives, for two worker counts. (ReadFile plans every fixture with ScanAt
// too, in the torchsnap tests.)
func TestScanAtMatchesScan(t *testing.T) {
	t.Parallel()
	paths := []string{filepath.Join(fixtureDir, "oom_batch.pickle"), filepath.Join(exampleDir, "example_train.pickle")}
	for _, pat := range []string{filepath.Join(exampleDir, "*.pickle"), filepath.Join(casesDir, "*_p[45].pickle")} {
		m, _ := filepath.Glob(pat)
		paths = append(paths, m...)
	}
	for _, path := range paths {
		b := readFile(t, path)
		want, err := Decode(b, DefaultLimits)
		if err != nil {
			continue // refused cases
		}
		wantDigest := digestOf(want)
		for _, workers := range []int{2, 7} {
			plan, err := ScanAt(bytes.NewReader(b), int64(len(b)), DefaultLimits, workers)
			if err != nil {
				t.Errorf("%s, %d workers: ScanAt: %v", filepath.Base(path), workers, err)
				continue
			}
			v, err := decodeWith(b, plan)
			if err != nil {
				t.Errorf("%s, %d workers: decoding with ScanAt's plan: %v", filepath.Base(path), workers, err)
				continue
			}
			if digestOf(v) != wantDigest {
				t.Errorf("%s, %d workers: decoding with ScanAt's plan gives a different value", filepath.Base(path), workers)
			}
		}
	}
}

// TestScanAtTruncated cuts a framed snapshot (several FRAMEs) at frame
// boundaries and in between: ScanAt must report a truncation, not plan.
func TestScanAtTruncated(t *testing.T) {
	full := readFile(t, filepath.Join(exampleDir, "example_train.pickle"))
	var cuts []int
	for off := 2; off+9 <= len(full) && full[off] == opFrame; {
		n := int(uint64(full[off+1]) | uint64(full[off+2])<<8 | uint64(full[off+3])<<16 | uint64(full[off+4])<<24)
		cuts = append(cuts, off, off+1, off+9, off+9+n/2)
		off += 9 + n
	}
	if len(cuts) < 12 {
		t.Fatalf("example_train.pickle has only %d frames", len(cuts)/4)
	}
	for i := 0; i < 40; i++ {
		cuts = append(cuts, len(full)*i/40+i)
	}
	cuts = append(cuts, len(full)-1)
	for _, cut := range cuts {
		b := full[:cut]
		for _, workers := range []int{2, 4} {
			_, err := ScanAt(bytes.NewReader(b), int64(cut), DefaultLimits, workers)
			var pe *Error
			if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "truncated") || pe.Offset > int64(cut) {
				t.Fatalf("cut at %d, %d workers: %v, want a truncation", cut, workers, err)
			}
		}
	}
}

// framed assembles a protocol 4 pickle from frame bodies.
func framed(bodies ...string) []byte {
	b := []byte("\x80\x04")
	for _, body := range bodies {
		b = append(b, opFrame)
		b = append(b, u64(uint64(len(body)))...)
		b = append(b, body...)
	}
	return b
}

// TestScanAtBadMemo checks the memo accounting across frames: reads of slots
// written in an earlier frame are fine, reads of slots never written fail,
// and a read of a huge slot index must not make the planner allocate for it.
func TestScanAtBadMemo(t *testing.T) {
	// The first frame is the longer, so that the planner cuts at the second.
	pad1, pad2 := strings.Repeat("N0", 60), strings.Repeat("N0", 40)
	cases := []struct {
		name string
		in   []byte
		msg  string // "" when the pickle is valid
	}{
		{"read across frames", framed("]\x94"+pad1, pad2+"h\x00\x86."), ""},
		{"read before any write", framed(pad1+"]", pad2+"h\x05\x86."), "read before it is written"},
		{"read of a slot written later", framed(pad1+"]h\x01", pad2+"\x94\x94\x86."), "read before it is written"},
		// Slot indices are at most the number of MEMOIZEs, which the input's
		// length bounds: planning must not allocate by the index.
		{"LONG_BINGET 200 million", framed(pad1+"N\x94", pad2+"j"+u32(200_000_000)+"\x86."), "read before it is written"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, serr := Decode(c.in, DefaultLimits)
			var plan *Plan
			var err error
			peak := peakHeap(func() { plan, err = ScanAt(bytes.NewReader(c.in), int64(len(c.in)), DefaultLimits, 2) })
			if peak > memBound {
				t.Errorf("planning %d bytes took the heap %d MiB higher", len(c.in), peak>>20)
			}
			if c.msg == "" {
				if serr != nil || err != nil {
					t.Fatalf("valid pickle: Decode %v, ScanAt %v", serr, err)
				}
				if _, err := decodeWith(c.in, plan); err != nil {
					t.Fatalf("decoding with ScanAt's plan: %v", err)
				}
				return
			}
			if serr == nil || !strings.Contains(serr.Error(), c.msg) {
				t.Errorf("Decode: %v, want %q", serr, c.msg)
			}
			if err == nil {
				_, err = decodeWith(c.in, plan)
			}
			if err == nil || !strings.Contains(err.Error(), "read") {
				t.Errorf("ScanAt: %v, want a memo error", err)
			}
		})
	}
}

// TestScanAtFallback: pickles the parallel planner cannot split (no frames,
// explicit PUTs, a frame chain that does not reach the end) are planned
// serially, with the same result.
func TestScanAtFallback(t *testing.T) {
	for _, in := range [][]byte{
		[]byte("\x80\x02]q\x00h\x00\x86."),
		framed("]q\x00"+strings.Repeat("N0", 30), strings.Repeat("N0", 30)+"h\x00\x86."),
		append(framed("](K\x01K\x02e"), []byte("0]\x94h\x00\x86.")...), // data after the last frame
		framed("N\x80\x04", strings.Repeat("N0", 30)+"."),              // a second PROTO
	} {
		want, err := Decode(in, DefaultLimits)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		plan, err := ScanAt(bytes.NewReader(in), int64(len(in)), DefaultLimits, 2)
		if err != nil {
			t.Fatalf("%q: ScanAt: %v", in, err)
		}
		v, err := decodeWith(in, plan)
		if err != nil || digestOf(v) != digestOf(want) {
			t.Fatalf("%q: decoding with ScanAt's plan: %v %s", in, err, fmt.Sprint(v.Kind))
		}
	}
}
