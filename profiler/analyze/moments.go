package analyze

// moments.go records what was live at every moment of the timeline, so a
// front end can draw the flame graph and top lines of any point in time.
//
// Design: trace events are streamed, never held, so the live set of an
// arbitrary moment cannot be rebuilt afterwards. Instead the replay adds each
// allocation (+bytes) and free (-bytes) to the open bucket of a time grid, as
// a net delta per origin: allocations and frees of one origin inside one bucket
// cancel, so a bucket holds only the origins whose live bytes changed across
// it. The grid doubles its width (merging neighbours) like the timeline's, so
// at most 2*MaxMoments buckets exist during the pass and MaxMoments after it.
// The live set at the end of bucket i is Base plus the deltas of buckets 0..i;
// a front end sums them (at most a few hundred thousand additions, a few
// milliseconds), so no checkpoints are stored.

import (
	"sort"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/flame"
)

// MaxMoments bounds the buckets of the moment grid.
const MaxMoments = 1000

// momentUnit is the unit of the deltas: every block is a multiple of 512 bytes.
const momentUnit = 512

// Moments is memory alive over time by origin, for one device (the one with
// the highest peak).
type Moments struct {
	Device  int   `json:"device"`
	StartUS int64 `json:"start_us"` // the start of bucket 0
	WidthUS int64 `json:"width_us"` // every bucket's width
	Unit    int64 `json:"unit"`     // bytes per delta unit
	// Frames are every frame of Origins, in the flame graph's node fields.
	Frames []MomentFrame `json:"frames"`
	// Origins are frame paths, root first, as indices into Frames.
	Origins [][]int32 `json:"origins"`
	// Sites index Frames with the source line each origin counts for in the
	// top lines; -1 where it names none.
	Sites []int32 `json:"sites"`
	// Base is what was live before the first bucket: origin, bytes pairs.
	Base []int64 `json:"base"`
	// Buckets hold origin, delta (in Unit) pairs: the net change across each bucket.
	Buckets [][]int64 `json:"buckets"`
}

// MomentFrame is one frame: name, file, line and kind as a flame-graph node
// has them (the front end builds each moment's flame tree from these).
type MomentFrame struct {
	N string             `json:"n"`
	F string             `json:"f,omitempty"`
	L int                `json:"l,omitempty"`
	T profiler.FrameKind `json:"t,omitempty"` // flame.NodeKind
}

// momentKey names where a block's bytes go: an origin, or a gap's recorded
// stack while the gap is still open (resolved when the pass ends).
type momentKey struct {
	g      *gap
	stack  profiler.StackID
	origin int32
}

type momentDelta struct {
	key   int32
	units int64
}

// momentGrid is the replay's side of Moments.
type momentGrid struct {
	t0, width int64
	started   bool
	keys      map[momentKey]int32
	keyList   []momentKey
	open      map[int32]int64 // deltas of bucket openIdx, not yet merged
	openIdx   int64
	buckets   [][]momentDelta // sorted by key
}

func newMomentGrid() *momentGrid {
	return &momentGrid{width: 1, keys: map[momentKey]int32{}, open: map[int32]int64{}}
}

func keyOf(b *block) momentKey {
	if b.gap != nil {
		return momentKey{g: b.gap, stack: b.stack}
	}
	return momentKey{origin: b.origin}
}

// add counts bytes (negative for a free) of key at time t.
func (m *momentGrid) add(t int64, k momentKey, bytes int64) {
	if !m.started {
		m.t0, m.started = t, true
	}
	u := bucketOf(t, m.t0, m.width)
	for u >= 2*MaxMoments {
		m.halve()
		u = bucketOf(t, m.t0, m.width)
	}
	i := max(int64(u), m.openIdx) // clocks of different threads can step back a little
	if i != m.openIdx {
		m.flush()
		m.openIdx = i
	}
	id, ok := m.keys[k]
	if !ok {
		id = int32(len(m.keyList))
		m.keys[k] = id
		m.keyList = append(m.keyList, k)
	}
	m.open[id] += bytes / momentUnit
}

// flush merges the open bucket into the grid.
func (m *momentGrid) flush() {
	if len(m.open) == 0 {
		return
	}
	ds := make([]momentDelta, 0, len(m.open))
	for k, u := range m.open {
		if u != 0 {
			ds = append(ds, momentDelta{k, u})
		}
	}
	clear(m.open)
	sort.Slice(ds, func(i, j int) bool { return ds[i].key < ds[j].key })
	for int64(len(m.buckets)) <= m.openIdx {
		m.buckets = append(m.buckets, nil)
	}
	m.buckets[m.openIdx] = mergeDeltas(m.buckets[m.openIdx], ds)
}

func (m *momentGrid) halve() {
	m.flush()
	n := (len(m.buckets) + 1) / 2
	for i := 0; i < n; i++ {
		a := m.buckets[2*i]
		if 2*i+1 < len(m.buckets) {
			a = mergeDeltas(a, m.buckets[2*i+1])
		}
		m.buckets[i] = a
	}
	clear(m.buckets[n:])
	m.buckets = m.buckets[:n]
	m.width *= 2
	m.openIdx /= 2
}

// mergeDeltas adds two key-sorted delta lists, dropping keys that cancel.
func mergeDeltas(a, b []momentDelta) []momentDelta {
	out := make([]momentDelta, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].key < b[j].key):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].key < a[i].key:
			out = append(out, b[j])
			j++
		default:
			if u := a[i].units + b[j].units; u != 0 {
				out = append(out, momentDelta{a[i].key, u})
			}
			i, j = i+1, j+1
		}
	}
	return out
}

// momentSource is what Result.Moments needs of the peak device.
type momentSource struct {
	device int
	grid   *momentGrid
	base   map[int32]int64 // origin -> bytes live before the trace's first event
}

// Moments is the live set over time of the device with the highest peak;
// nil when that device has no trace.
func (r *Result) Moments() *Moments {
	src := r.moments
	if src == nil || src.grid == nil || !src.grid.started {
		return nil
	}
	g := src.grid
	g.flush()
	for len(g.buckets) > MaxMoments {
		g.halve()
	}
	out := &Moments{Device: src.device, StartUS: g.t0, WidthUS: g.width, Unit: momentUnit,
		Frames: []MomentFrame{}, Origins: [][]int32{}, Sites: []int32{}, Base: []int64{}, Buckets: make([][]int64, len(g.buckets))}
	tab := newMomentTable(r, out)
	for _, id := range sortedOrigins(src.base) {
		if v := src.base[id]; v != 0 {
			out.Base = append(out.Base, int64(tab.index(id)), v)
		}
	}
	// Keys that resolve to the same origin (gap stacks) merge per bucket.
	for i, ds := range g.buckets {
		sum := map[int32]int64{}
		for _, d := range ds {
			sum[tab.index(g.resolve(d.key))] += d.units
		}
		row := []int64{}
		for _, o := range sortedOrigins(sum) {
			if u := sum[o]; u != 0 {
				row = append(row, int64(o), u)
			}
		}
		out.Buckets[i] = row
	}
	return out
}

func (m *momentGrid) resolve(key int32) int32 {
	k := m.keyList[key]
	if k.g != nil {
		return k.g.origins[k.stack]
	}
	return k.origin
}

func sortedOrigins(m map[int32]int64) []int32 {
	ids := make([]int32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// momentTable numbers origins and frames as Moments lists them.
type momentTable struct {
	r       *Result
	out     *Moments
	origins map[int32]int32
	frames  map[MomentFrame]int32
}

func newMomentTable(r *Result, out *Moments) *momentTable {
	return &momentTable{r: r, out: out, origins: map[int32]int32{}, frames: map[MomentFrame]int32{}}
}

// index is an origin's place in out.Origins, adding it (and its frames) once.
func (t *momentTable) index(id int32) int32 {
	if i, ok := t.origins[id]; ok {
		return i
	}
	path := t.r.framePath(id, true)
	ids := make([]int32, len(path))
	for j, f := range path {
		ids[j] = t.frame(MomentFrame{N: f.Func, F: f.File, L: f.Line})
	}
	site := int32(-1)
	if id >= 0 {
		if f, ok := t.r.origins.userFrame(profiler.StackID(id)); ok {
			site = t.frame(MomentFrame{N: f.Func, F: t.r.paths.Map(f.File), L: f.Line})
		}
	}
	i := int32(len(t.out.Origins))
	t.origins[id] = i
	t.out.Origins = append(t.out.Origins, ids)
	t.out.Sites = append(t.out.Sites, site)
	return i
}

func (t *momentTable) frame(f MomentFrame) int32 {
	f.T = flame.NodeKind(f.F)
	if i, ok := t.frames[f]; ok {
		return i
	}
	i := int32(len(t.out.Frames))
	t.frames[f] = i
	t.out.Frames = append(t.out.Frames, f)
	return i
}
