package analyze

import (
	"math"
	"sort"
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// Memory categories: what a block is for, decided from where it was
// allocated (its frames, an Optimizer.step scope) and how long it lived
// relative to the backward pass and the optimizer step.
const (
	CatParameter      = "parameter"       // allocated before recording or by model building, alive to the end
	CatGradient       = "gradient"        // made by backward (autograd's thread) and alive into the optimizer step
	CatOptimizerState = "optimizer_state" // made by optimizer code and alive after its step
	CatActivation     = "activation"      // made in forward and still alive when backward began (saved for it)
	CatTemporary      = "temporary"       // freed before the phase that made it ended
	CatOther          = "other"           // long-lived tensors no backward used (caches, kept outputs), and pre-trace blocks freed later
	// CatUnknown: see tensors.go.
)

var categoryOrder = []string{CatParameter, CatGradient, CatOptimizerState, CatActivation, CatTemporary, CatOther}

// namedCategoryOrder is the order when the agent named tensors: what it could not name is unknown.
var namedCategoryOrder = append(categoryOrder[:len(categoryOrder):len(categoryOrder)], CatUnknown)

// Category is the memory of one category at a moment (the peak).
type Category struct {
	Name   string  `json:"name"`
	Bytes  int64   `json:"bytes"`
	Blocks int64   `json:"blocks"`
	Share  float64 `json:"share"` // of the bytes allocated at that moment
}

// lifetimes classifies the blocks of one device trace.
type lifetimes struct {
	a         *analysis
	order     []string         // the categories reported (categoryOrder, and unknown with named tensors)
	pre       preTraceSplit    // pre-trace memory alive at the end, by category (pretrace.go)
	named     map[int64]string // with named tensors: the category of each block (by seq) alive at the end that the agent named
	frameless *allocTimes      // allocations with no frames at all: the backward pass
	userAlloc *allocTimes      // allocations whose stack reaches user code
	opt       []window
	ends      []int64 // step ends
	optCode   map[profiler.StackID]bool
	build     map[profiler.StackID]bool
	// inference memory (categories_infer.go)
	hasKV    bool
	kvFrames bool // blocks allocated in a cache's code are kv_cache (not in training: there they are activations)
	kvCode   map[profiler.StackID]bool
	pools    []addrRange
}

func newLifetimes(a *analysis, lv levels, opt []window, steps []Step, pre preTraceSplit) *lifetimes {
	lt := &lifetimes{a: a, opt: opt, optCode: map[profiler.StackID]bool{}, build: map[profiler.StackID]bool{},
		order: categoryOrder, pre: pre}
	if a.names != nil || pre.bytes[CatUnknown] > 0 {
		lt.order = namedCategoryOrder
	}
	lt.frameless = newAllocTimes(lv, func(e logEntry) bool { return e.stack == 1 })
	lt.userAlloc = newAllocTimes(lv, func(e logEntry) bool {
		return e.stack > 1 && a.origins.hasUser(profiler.StackID(e.stack-1))
	})
	for _, s := range steps {
		lt.ends = append(lt.ends, s.EndUS)
	}
	return lt
}

// after is the first time in ts later than t and not past limit.
func after(ts []int64, t, limit int64) (int64, bool) {
	i := sort.Search(len(ts), func(i int) bool { return ts[i] > t })
	if i < len(ts) && ts[i] <= limit {
		return ts[i], true
	}
	return 0, false
}

func (lt *lifetimes) stackOf(b block) profiler.StackID {
	if b.gap != nil {
		return b.stack
	}
	return profiler.StackID(b.origin)
}

// optWindow is the Optimizer.step scope that contains t.
func (lt *lifetimes) optWindow(t int64) (window, bool) {
	i := sort.Search(len(lt.opt), func(i int) bool { return lt.opt[i].end >= t })
	if i < len(lt.opt) && lt.opt[i].start <= t {
		return lt.opt[i], true
	}
	return window{}, false
}

func (lt *lifetimes) isOptimizer(s profiler.StackID) bool {
	v, ok := lt.optCode[s]
	if !ok {
		for _, id := range lt.a.frames.StackAt(s) {
			if strings.Contains(lt.a.frames.FrameAt(id).File, "torch/optim/") {
				v = true
				break
			}
		}
		lt.optCode[s] = v
	}
	return v
}

// buildFuncs are the functions that create a model's tensors on the device.
var buildFuncs = map[string]bool{"_apply": true, "cuda": true, "to": true, "reset_parameters": true,
	"_load_from_state_dict": true, "load_state_dict": true, "from_pretrained": true, "_load_pretrained_model": true}

func (lt *lifetimes) isBuild(s profiler.StackID) bool {
	v, ok := lt.build[s]
	if !ok {
		for _, id := range lt.a.frames.StackAt(s) {
			f := lt.a.frames.FrameAt(id)
			if buildFuncs[f.Func] || (f.Func == "__init__" && strings.Contains(f.File, "torch/nn/")) {
				v = true
				break
			}
		}
		lt.build[s] = v
	}
	return v
}

// classify says what a block live at moment h was. With future, what
// happened after h (when it was freed, whether backward used it) counts, as
// it does for the peak; at an OOM it does not (what follows is unwinding).
func (lt *lifetimes) classify(b block, h int64, future bool) string {
	ft := b.ft
	if ft == 0 || (!future && ft > h) {
		ft = math.MaxInt64
	}
	alive := ft == math.MaxInt64
	if c := lt.inferenceCategory(b); c != "" {
		return c
	}
	if b.seq < 0 {
		if alive {
			return CatParameter
		}
		return CatOther
	}
	limit := int64(math.MaxInt64)
	if !future {
		limit = h
	}
	stack := lt.stackOf(b)
	w, inOpt := lt.optWindow(b.t)
	if inOpt || lt.isOptimizer(stack) {
		end := w.end
		if !inOpt {
			e, ok := after(lt.ends, b.t, limit)
			if !ok {
				if alive {
					return CatOptimizerState
				}
				return CatTemporary
			}
			end = e
		}
		if ft > end {
			return CatOptimizerState
		}
		return CatTemporary
	}
	if stack == 0 { // autograd's thread
		var next int64
		var ok bool
		if len(lt.opt) > 0 {
			i := sort.Search(len(lt.opt), func(i int) bool { return lt.opt[i].start > b.t })
			if i < len(lt.opt) && lt.opt[i].start <= limit {
				next, ok = lt.opt[i].start, true
			}
		} else {
			next, ok = lt.userAlloc.after(b.t, limit)
		}
		if (ok && ft > next) || (!ok && alive) {
			return CatGradient
		}
		return CatTemporary
	}
	if alive && lt.isBuild(stack) {
		return CatParameter
	}
	if bw, ok := lt.frameless.after(b.t, limit); ok {
		if ft > bw {
			return CatActivation
		}
		return CatTemporary
	}
	if !alive {
		return CatTemporary
	}
	// Alive, and no backward pass began after it (by h for an OOM). In a
	// training run a block made since the last step ended belongs to the
	// forward pass in flight; one that outlived a step boundary unused, or any
	// long-lived block of a run without backward, is something kept.
	if _, ok := after(lt.ends, b.t, limit); ok {
		return CatOther
	}
	if lt.frameless.any() && lt.frameless.first < b.t {
		return CatActivation
	}
	return CatOther
}

// catBlock is a block with its category.
type catBlock struct {
	block
	cat string
}

// untracked splits bytes allocated before the trace (known only from the
// end state) by category: as the agent named them, the rest unknown; without
// names, by the stacks that allocated them (preCategory: optimizer state or
// parameters, as the model is usually built before recording).
func (lt *lifetimes) untracked(n int64) map[string]int64 {
	if n <= 0 {
		return nil
	}
	rest := CatUnknown
	if lt.a.names == nil {
		rest = CatParameter
	}
	var named int64
	for _, v := range lt.pre.bytes {
		named += v
	}
	out := map[string]int64{}
	scale := 1.0
	if named > n { // fewer untracked bytes at this moment than at the end
		scale = float64(n) / float64(named)
	}
	var got int64
	for c, v := range lt.pre.bytes {
		out[c] = int64(float64(v) * scale)
		got += out[c]
	}
	out[rest] += n - got
	return out
}

// tally classifies blocks live at moment h, and splits the untracked bytes.
func (lt *lifetimes) tally(blocks []block, untracked int64, h int64, future bool) ([]Category, []catBlock) {
	sum := map[string]*Category{}
	for _, n := range lt.order {
		sum[n] = &Category{Name: n}
	}
	out := make([]catBlock, 0, len(blocks))
	var total int64
	for _, b := range blocks {
		c, ok := lt.named[b.seq]
		if !ok || b.seq < 0 {
			c = lt.classify(b, h, future)
		}
		out = append(out, catBlock{b, c})
		sum[c].Bytes += b.size
		sum[c].Blocks++
		total += b.size
	}
	for c, n := range lt.untracked(untracked) {
		sum[c].Bytes += n
		sum[c].Blocks += lt.pre.blocksAt(c, n)
		total += n
	}
	cats := make([]Category, 0, len(lt.order))
	for _, n := range lt.order {
		c := *sum[n]
		if total > 0 {
			c.Share = float64(c.Bytes) / float64(total)
		}
		cats = append(cats, c)
	}
	return cats, out
}

func catBytes(cats []Category, name string) int64 {
	for _, c := range cats {
		if c.Name == name {
			return c.Bytes
		}
	}
	return 0
}

// categoryTimeline splits every timeline point by category: the level log
// is replayed once backwards, to classify each allocation by its whole
// lifetime (as at the peak), and once forwards, where a point takes the
// levels of the moment its allocated maximum was reached, so its categories
// add up to its allocated bytes. preLive is the pre-trace memory alive to
// the end (parameters); pre-trace blocks freed during the trace are "other"
// until freed.
// It returns the categories of the log's entries (classifyLog), nil when the
// log or the timeline is empty.
func (lt *lifetimes) categoryTimeline(tl *Timeline, t *tracker, preLive int64) []uint8 {
	n, pts := t.log.len(), tl.Points
	if n == 0 || len(pts) == 0 {
		return nil
	}
	catIdx := make(map[string]int, len(lt.order))
	for i, c := range lt.order {
		catIdx[c] = i
	}
	cats := lt.classifyLog(t, catIdx, lt.pooledEntries(t))
	level := make([]int64, len(lt.order))
	for c, n := range lt.untracked(preLive) {
		level[catIdx[c]] += n
	}
	level[catIdx[CatOther]] += t.preFreed
	// The sizes of the rare allocations that also ended an older block.
	sizes := map[int]int64{}
	best := make([]int64, len(pts))
	// A point starts at the level its bucket opened with (the timeline
	// counts it too), then keeps the highest moment inside it.
	pts[0].Categories = append([]int64(nil), level...)
	k := 0
	var prev int64
	sizeOf := func(i int) int64 {
		if s, ok := sizes[i]; ok {
			return s
		}
		if i == 0 {
			return t.log.at(0).cur
		}
		return t.log.at(i).cur - t.log.at(i-1).cur
	}
	for i := 0; i < n; i++ {
		e := t.log.at(i)
		at := t.firstT + e.t
		for k+1 < len(pts) && at >= pts[k+1].TimeUS {
			k++
			pts[k].Categories = append([]int64(nil), level...)
			best[k] = prev
		}
		delta := e.cur - prev
		prev = e.cur
		switch {
		case e.stack != 0:
			if old, ok := t.replaced[int32(i)]; ok {
				was := sizeOf(int(old))
				level[cats[old]] -= was
				delta += was
				sizes[i] = delta
			}
			level[cats[i]] += delta
		case e.back > 0:
			level[cats[e.back-1]] += delta
		default:
			level[catIdx[CatOther]] += delta // a block from before the trace
		}
		if e.cur >= best[k] {
			copy(pts[k].Categories, level)
			best[k] = e.cur
		}
	}
	// Points after the last entry kept its level, unless the log stopped
	// early (then their split is unknown).
	for k++; k < len(pts) && !t.truncated; k++ {
		pts[k].Categories = append([]int64(nil), level...)
	}
	tl.CategoryNames = lt.order
	return cats
}

// classifyLog gives every allocation of the log its category (by index, 1
// byte an entry; frees keep 0). It walks the log backwards, so each
// allocation's free has been met by the time the allocation is; only the
// blocks live at that moment wait in the map.
func (lt *lifetimes) classifyLog(t *tracker, catIdx map[string]int, pooled map[int32]uint64) []uint8 {
	n := t.log.len()
	cats := make([]uint8, n)
	freedAt := map[int]int64{} // allocation index -> when it was freed
	for i := n - 1; i >= 0; i-- {
		e := t.log.at(i)
		at := t.firstT + e.t
		if e.stack == 0 {
			if e.back > 0 {
				freedAt[e.back-1] = max(at, 1)
			}
			continue
		}
		if old, ok := t.replaced[int32(i)]; ok {
			freedAt[int(old)] = max(at, 1) // ended by this allocation over its address
		}
		b := block{seq: int64(i), t: at, origin: int32(e.stack - 1), li: int32(i), ft: freedAt[i], addr: pooled[int32(i)]}
		delete(freedAt, i)
		cats[i] = uint8(catIdx[lt.classify(b, at, true)])
	}
	return cats
}
