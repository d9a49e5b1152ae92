package analyze_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// mapInputs are the real snapshots of every kind of allocator state: the
// repository's and shared examples, expandable segments, a CUDA graph's
// private pool, fragmentation OOMs, and the agent's OOM captures.
func mapInputs(t *testing.T) map[string]*analyze.Result {
	out := map[string]*analyze.Result{}
	for _, in := range inputs(t) {
		out[in.name] = result(t, in.name)
	}
	oom, _ := filepath.Glob(filepath.Join(exampleDir, "oom", "*.pickle"))
	for _, p := range oom {
		r, err := analyze.Run(p, analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out["oom/"+strings.TrimSuffix(filepath.Base(p), ".pickle")] = r
	}
	return out
}

// Every map tiles its segments with blocks; the snapshot's map agrees with
// the allocator state read from the same segments; the peak's, replayed
// back from the end, holds exactly the bytes the replay found live at the
// peak; an OOM's carries the failing request.
func TestAllocatorMapsHold(t *testing.T) {
	for name, r := range mapInputs(t) {
		t.Run(name, func(t *testing.T) {
			if len(r.AllocatorMaps) != len(r.Devices) {
				t.Fatalf("%d devices, maps for %d", len(r.Devices), len(r.AllocatorMaps))
			}
			for i, dm := range r.AllocatorMaps {
				d := r.Devices[i]
				for _, m := range dm.Maps {
					checkTiles(t, m)
					switch m.At {
					case "snapshot":
						if m.Allocated != d.Allocator.Allocated || m.Reserved != d.Allocator.Reserved || m.LargestFreeBlock != d.Allocator.LargestFreeBlock {
							t.Errorf("snapshot map: allocated %d reserved %d largest %d, allocator state %d %d %d",
								m.Allocated, m.Reserved, m.LargestFreeBlock, d.Allocator.Allocated, d.Allocator.Reserved, d.Allocator.LargestFreeBlock)
						}
					case "peak":
						if !near(m.Allocated, d.Peak.Bytes) {
							t.Errorf("peak map holds %d allocated, the peak is %d", m.Allocated, d.Peak.Bytes)
						}
					case "oom":
						if o := firstOOM(r, dm.Device); o == nil || m.Request != o.Requested || m.TimeUS != o.TimeUS || !near(m.Allocated, o.Allocated) {
							t.Errorf("oom map: request %d at %d holding %d, OOM %+v", m.Request, m.TimeUS, m.Allocated, o)
						}
					}
				}
			}
		})
	}
}

// near: the replay sizes a block from its request (rounded to 512 bytes),
// the map from the snapshot where the block is still there at the end (a
// large request can get a whole unsplit remainder), so the two differ by
// those remainders: within 1%.
func near(got, want int64) bool {
	d := got - want
	return d >= -want/100 && d <= want/100
}

func firstOOM(r *analyze.Result, dev int) *analyze.OOM {
	for i := range r.OOMs {
		if r.OOMs[i].Device == dev {
			return &r.OOMs[i]
		}
	}
	return nil
}

// checkTiles: blocks cover each segment from offset 0 to its size, in order,
// and allocated blocks request no more than their size.
func checkTiles(t *testing.T, m analyze.AllocMap) {
	t.Helper()
	for _, s := range m.Segments {
		at := int64(0)
		for _, b := range s.Blocks {
			if b.Offset != at || b.Size <= 0 {
				t.Fatalf("%s map, segment %#x: block at %d (size %d), want offset %d", m.At, s.Addr, b.Offset, b.Size, at)
			}
			if b.Requested > b.Size || (b.Line > len(m.Lines)) {
				t.Fatalf("%s map, segment %#x: block %+v (lines %d)", m.At, s.Addr, b, len(m.Lines))
			}
			at += b.Size
		}
		if at != s.Size {
			t.Fatalf("%s map, segment %#x: blocks cover %d of %d", m.At, s.Addr, at, s.Size)
		}
	}
}

// The maps of the allocator states that matter, as text: each segment with
// its flags and its blocks by state (golden).
func TestGoldenAllocatorMaps(t *testing.T) {
	all := mapInputs(t)
	var b strings.Builder
	for _, name := range []string{"expandable", "cuda_graph", "frag_oom", "frag_oom_expandable", "oom/too_big"} {
		r := all[name]
		if r == nil {
			continue
		}
		for _, dm := range r.AllocatorMaps {
			for _, m := range dm.Maps {
				fmt.Fprintf(&b, "%s device %d %s: reserved %d allocated %d largest free %d request %d lines %d\n",
					name, dm.Device, m.At, m.Reserved, m.Allocated, m.LargestFreeBlock, m.Request, len(m.Lines))
				for _, s := range m.Segments {
					fmt.Fprintf(&b, "  %#x %d stream %d pool %v expandable %v:", s.Addr, s.Size, s.Stream, s.Pool, s.Expandable)
					for _, bl := range s.Blocks {
						fmt.Fprintf(&b, " %s", blockText(bl, m.Lines))
					}
					b.WriteString("\n")
				}
			}
		}
	}
	golden.Check(t, "allocator_maps.golden", []byte(b.String()))
}

func blockText(b analyze.AllocBlock, lines []string) string {
	s := fmt.Sprintf("%s:%d", b.State[:1], b.Size)
	if b.State == "allocated" && b.Requested != b.Size {
		s += fmt.Sprintf("(req %d)", b.Requested)
	}
	if b.Line > 0 {
		s += "@" + strings.Fields(lines[b.Line-1])[0]
	}
	return s
}
