package analyze

import (
	"fmt"
	"sort"
	"strings"
)

// survivor is one place's blocks (a user line, or the innermost frame or
// phase where no user frame was recorded) that are still live at the end of
// the trace, by the step that allocated them.
type survivor struct {
	file    string
	line    int
	fn      string
	origins []int32
	steps   map[int]int64 // step index (len(steps): after the last step) -> bytes
	sizes   map[int64]bool
	blocks  int64
	bytes   int64
	first   int64 // allocation time of the earliest and the latest block
	last    int64
}

// stepOf is the index of the step a time falls in (len(steps) after the last).
func stepOf(steps []Step, t int64) int {
	return sort.Search(len(steps), func(i int) bool { return steps[i].EndUS >= t })
}

// survivors groups the blocks live at the end by place, skipping optimizer
// code and private pools (CUDA graphs): their memory lives on by design.
func (dg *devDiag) survivors() []*survivor {
	steps := dg.d.Steps
	type placeKey struct {
		file, fn string
		line     int
	}
	m := map[placeKey]*survivor{}
	for addr, b := range dg.t.live {
		if dg.lt.isOptimizer(dg.lt.stackOf(b)) || inRanges(dg.pools, addr) {
			continue
		}
		if _, in := dg.lt.optWindow(b.t); in {
			continue
		}
		o := b.resolved()
		file, line, fn := dg.place(o)
		k := placeKey{file, fn, line}
		s := m[k]
		if s == nil {
			s = &survivor{file: file, line: line, fn: fn, steps: map[int]int64{}, sizes: map[int64]bool{}, first: b.t, last: b.t}
			m[k] = s
		}
		if len(s.origins) == 0 || s.origins[len(s.origins)-1] != o {
			s.origins = append(s.origins, o)
		}
		s.steps[stepOf(steps, b.t)] += b.size
		s.sizes[b.size] = true
		s.blocks++
		s.bytes += b.size
		s.first, s.last = min(s.first, b.t), max(s.last, b.t)
	}
	out := make([]*survivor, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].bytes != out[j].bytes {
			return out[i].bytes > out[j].bytes
		}
		if out[i].file != out[j].file {
			return out[i].file < out[j].file
		}
		return out[i].line < out[j].line
	})
	return out
}

// leak reports memory that survives every step. With N steps, the steps
// 1..N-2 are read (step 0 creates optimizer state and other one-time
// buffers; blocks of the last step may still be in use): an origin leaks when
// blocks it allocated in at least two thirds of those steps, and in the last
// of them, are all still live at the end — they survived every step boundary
// since. The level at the step boundaries must agree: between the ends of
// steps 1 and N-2 it grew by at least half of what those origins kept from
// steps 2..N-2 (so blocks handed over to a bounded rotation do not count).
// Sites that stop allocating while the steps go on are not leaks but caches
// (cacheGrowth), nor are sites keyed by shape that skip steps (keyedByShape).
func (dg *devDiag) leak() (*Finding, map[string]bool) {
	steps := dg.d.Steps
	n := len(steps)
	if n < 4 {
		return nil, nil
	}
	k := n - 2 // steps 1..n-2
	var sites []*survivor
	var kept, keptLater int64
	for _, s := range dg.survivors() {
		cnt := 0
		for i := 1; i <= n-2; i++ {
			if s.steps[i] > 0 {
				cnt++
			}
		}
		if cnt < 2 || 3*cnt < 2*k || s.steps[n-2] == 0 || (s.keyedByShape() && cnt < k) {
			continue
		}
		sites = append(sites, s)
		for i := 1; i <= n-2; i++ {
			kept += s.steps[i]
			if i >= 2 {
				keptLater += s.steps[i]
			}
		}
	}
	if len(sites) == 0 {
		return nil, nil
	}
	grown := steps[n-2].LiveBytesAtEnd - steps[1].LiveBytesAtEnd
	if grown <= 0 || 2*grown < keptLater {
		return nil, nil
	}
	perStep := kept / int64(k)
	f := Finding{Kind: KindLeak, Severity: "warning",
		Evidence: Evidence{Numbers: map[string]int64{"growth_per_step": perStep, "steps": int64(n),
			"leaked_bytes": kept, "from_step": 1, "to_step": int64(n - 2), "live_growth": grown,
			"live_bytes_at_from_step_end": steps[1].LiveBytesAtEnd, "live_bytes_at_to_step_end": steps[n-2].LiveBytesAtEnd},
			StartUS: steps[1].StartUS, EndUS: steps[n-2].EndUS}}
	isSite := map[*survivor]bool{}
	var names []string
	for i, s := range sites {
		isSite[s] = true
		if i >= 5 {
			continue
		}
		file, line, fn := s.file, s.line, s.fn
		if i == 0 {
			f.File, f.Line = file, line
		}
		last := 0
		for st := range s.steps {
			if st <= n-2 && st > last {
				last = st
			}
		}
		f.Evidence.Lines = append(f.Evidence.Lines, EvidenceLine{File: file, Line: line, Bytes: s.bytes,
			Note: fmt.Sprintf("%s: %d blocks never freed, %s per step", fn, s.blocks, fb(s.steps[last]))})
		if file != "" {
			names = append(names, dg.short(file, line))
		} else {
			names = append(names, fn)
		}
	}
	fill := ""
	capBytes, src := dg.capacity()
	lastPeak := steps[n-1].PeakBytes
	switch {
	case len(dg.ooms) > 0:
		at := stepOf(steps, dg.ooms[0].o.TimeUS)
		f.Evidence.Numbers["oom_step"] = int64(at)
		fill = fmt.Sprintf("; it ran out of memory in step %d", at)
	case src == "given" && perStep > 0 && capBytes > lastPeak:
		more := (capBytes - lastPeak + perStep - 1) / perStep
		f.Evidence.Numbers["device_memory"] = capBytes
		f.Evidence.Numbers["fills_device_at_step"] = int64(n-1) + more
		fill = fmt.Sprintf("; at this rate the %s device fills at step %d", fb(capBytes), int64(n-1)+more)
	case src == "given":
		f.Evidence.Numbers["device_memory"] = capBytes
	default:
		fill = "; the device memory is unknown (pass --device-memory) so when it fills cannot be said"
	}
	f.Title = fmt.Sprintf("Leak: memory live between steps grows by %s per step over %d steps; blocks from %s survive every step%s",
		fb(perStep), n, strings.Join(names, ", "), fill)
	f.Fix = fmt.Sprintf("something keeps tensors from every step alive (allocated at %s): store plain numbers (loss.item()) "+
		"or detached copies (t.detach(), t.cpu()) instead of tensors that carry their autograd graph, and clear or bound the container",
		strings.Join(names, ", "))
	keys := map[string]bool{}
	for s := range isSite {
		keys[s.key()] = true
	}
	return &f, keys
}

// keyedByShape says whether a site's surviving blocks look like a cache's
// entries: at least three sizes and no size twice (one entry per key). Such
// a site leaks only when it added a block on every step; one that skipped
// steps (cache hits) is unboundedCache's or cacheGrowth's.
func (s *survivor) keyedByShape() bool { return len(s.sizes) >= 3 && int64(len(s.sizes)) == s.blocks }

func (s *survivor) key() string { return fmt.Sprintf("%s:%d:%s", s.file, s.line, s.fn) }
