// Package profiler is the model of a GPU-memory profile: frames, stacks, allocator
// segments and blocks, trace events and annotations, as PyTorch's CUDA caching
// allocator records them. It imports nothing but the standard library; decoders
// (torchsnap), analyses (analyze) and renderers (flame, pprofenc) sit on top of it.
package profiler

import "fmt"

// Frame is one Python (or C++) frame of an allocation's call stack.
type Frame struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Func string `json:"function"`
}

// FrameID and StackID index a Frames table. Stack 0 is the empty stack.
type (
	FrameID uint32
	StackID uint32
)

// Action is what a trace event records.
type Action uint8

// The trace actions of torch.cuda.memory._snapshot() device traces.
const (
	ActUnknown Action = iota
	ActAlloc
	ActFreeRequested
	ActFreeCompleted
	ActSegmentAlloc
	ActSegmentFree
	ActSegmentMap
	ActSegmentUnmap
	ActSnapshot
	ActOOM
	ActAnnotate
)

var actionNames = [...]string{"unknown", "alloc", "free_requested", "free_completed", "segment_alloc",
	"segment_free", "segment_map", "segment_unmap", "snapshot", "oom", "user_defined"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}

// ParseAction maps PyTorch's action string to an Action; unknown strings give ActUnknown.
func ParseAction(s string) Action {
	switch s {
	case "alloc":
		return ActAlloc
	case "free_requested", "free":
		return ActFreeRequested
	case "free_completed":
		return ActFreeCompleted
	case "segment_alloc":
		return ActSegmentAlloc
	case "segment_free":
		return ActSegmentFree
	case "segment_map":
		return ActSegmentMap
	case "segment_unmap":
		return ActSegmentUnmap
	case "snapshot":
		return ActSnapshot
	case "oom":
		return ActOOM
	case "user_defined", "annotate":
		return ActAnnotate
	}
	return ActUnknown
}

// Event is one entry of a device trace. For ActOOM, Addr is zero and DeviceFree
// holds the bytes the driver reported free; Size is the failed request.
type Event struct {
	Action     Action
	Addr       uint64
	Size       uint64
	Stream     int64
	TimeUS     int64
	DeviceFree uint64
	Stack      StackID
	Seq        int64  // position in this device's trace, from 0
	UserMeta   string // user_metadata / annotation name, if any
}

// BlockState is the allocator state of a block at snapshot time.
type BlockState uint8

// Block states; PyTorch spells pending free as active_pending_free (and, in
// older versions, active_awaiting_free).
const (
	BlockInactive BlockState = iota
	BlockActiveAllocated
	BlockActivePendingFree
)

// ParseBlockState maps PyTorch's state string; unknown states count as inactive.
func ParseBlockState(s string) BlockState {
	switch s {
	case "active_allocated":
		return BlockActiveAllocated
	case "active_pending_free", "active_awaiting_free":
		return BlockActivePendingFree
	}
	return BlockInactive
}

func (s BlockState) String() string {
	switch s {
	case BlockActiveAllocated:
		return "active_allocated"
	case BlockActivePendingFree:
		return "active_pending_free"
	}
	return "inactive"
}

// Block is a piece of a segment at snapshot time.
type Block struct {
	Addr      uint64
	Size      uint64
	Requested uint64
	State     BlockState
	Stack     StackID
}

// Segment is one cudaMalloc'd (or expandable, mapped) region at snapshot time.
type Segment struct {
	Device     int
	Addr       uint64
	TotalSize  uint64
	Allocated  uint64
	Active     uint64
	Requested  uint64
	Stream     int64
	Type       string // "large" or "small"
	PoolID     [2]int64
	Expandable bool
	Blocks     []Block
}

// PrivatePool reports whether the segment belongs to a private pool (CUDA graphs, MemPool).
func (s *Segment) PrivatePool() bool { return s.PoolID != [2]int64{} }

// Annotation is a record_function scope boundary from external_annotations.
type Annotation struct {
	Name   string `json:"name"`
	Start  bool   `json:"start"`
	Device int    `json:"device"`
	TimeUS int64  `json:"time_us"`
}

// Settings is the part of allocator_settings the analyses use; Raw keeps the
// scalar settings as they were recorded.
type Settings struct {
	AllocConf          string            `json:"PYTORCH_CUDA_ALLOC_CONF"`
	ExpandableSegments bool              `json:"expandable_segments"`
	MaxSplitSize       int64             `json:"max_split_size"`
	Raw                map[string]string `json:"raw,omitempty"`
}

// MaxStackDepth bounds the frames of a stack. A deeper one (runaway
// recursion, or a hostile file: 600,000 frames fit in 1.2 MB of pickle) keeps
// its innermost and outermost frames with one "[N frames elided]" frame
// between them, so that everything built from stacks (flame trees and their
// JSON, pprof profiles, hovers) stays bounded. Python's default recursion
// limit is 1,000; the bound is well above it.
const MaxStackDepth = 4096

// Of a stack deeper than MaxStackDepth, keepInner innermost and keepOuter
// outermost frames are kept, with the elided frame between.
const (
	keepInner = MaxStackDepth / 2
	keepOuter = MaxStackDepth - keepInner - 1
)

// ElidedFrame stands for n frames left out of the middle of a stack.
func ElidedFrame(n int) Frame { return Frame{Func: fmt.Sprintf("[%d frames elided]", n)} }

// Frames interns frames and stacks so each distinct frame and stack is stored once.
type Frames struct {
	frames   []Frame
	frameIdx map[Frame]FrameID
	stacks   [][]FrameID // innermost frame first, as PyTorch records them
	stackIdx map[string]StackID
	keyBuf   []byte
	elided   []FrameID
}

// NewFrames returns a table holding only the empty stack.
func NewFrames() *Frames {
	return &Frames{frameIdx: map[Frame]FrameID{}, stacks: [][]FrameID{nil}, stackIdx: map[string]StackID{"": 0}}
}

// Frame interns f.
func (t *Frames) Frame(f Frame) FrameID {
	if id, ok := t.frameIdx[f]; ok {
		return id
	}
	id := FrameID(len(t.frames))
	t.frames = append(t.frames, f)
	t.frameIdx[f] = id
	return id
}

// Stack interns a stack given innermost frame first. The slice is copied. A
// stack deeper than MaxStackDepth is interned without its middle frames.
func (t *Frames) Stack(ids []FrameID) StackID {
	if len(ids) > MaxStackDepth {
		ids = t.elide(ids)
	}
	b := t.keyBuf[:0]
	for _, id := range ids {
		b = append(b, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	}
	t.keyBuf = b
	if id, ok := t.stackIdx[string(b)]; ok {
		return id
	}
	id := StackID(len(t.stacks))
	t.stacks = append(t.stacks, append([]FrameID(nil), ids...))
	t.stackIdx[string(b)] = id
	return id
}

// elide returns ids cut to MaxStackDepth frames, in a buffer of t's.
func (t *Frames) elide(ids []FrameID) []FrameID {
	mid := t.Frame(ElidedFrame(len(ids) - keepInner - keepOuter))
	e := append(t.elided[:0], ids[:keepInner]...)
	e = append(e, mid)
	e = append(e, ids[len(ids)-keepOuter:]...)
	t.elided = e
	return e
}

// FrameAt returns an interned frame.
func (t *Frames) FrameAt(id FrameID) Frame { return t.frames[id] }

// StackAt returns the frame IDs of a stack, innermost first. Do not modify.
func (t *Frames) StackAt(id StackID) []FrameID { return t.stacks[id] }

// NumStacks is the number of distinct stacks, the empty one included.
func (t *Frames) NumStacks() int { return len(t.stacks) }

// NumFrames is the number of distinct frames.
func (t *Frames) NumFrames() int { return len(t.frames) }
