package analyze

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// An origin is where an allocation is attributed: a recorded stack, or, for
// allocations without frames, a synthetic place named after the Python activity
// around it. Origins >= 0 are StackIDs; negative ones index synthetic.
type origin struct {
	allocBytes, allocs, maxAlloc int64
	peakBytes, peakCount         int64
	currentBytes, currentCount   int64
	cats                         map[string]int64 // bytes live at the peak by memory category
	// module is the module path its named blocks share (flame.JoinModules),
	// "" when the agent named none of them.
	module string
}

type synthetic struct {
	kind        string // "gap", "pretrace", "tensor" (tensors.go) or "inflight" (inflight.go)
	left, right profiler.StackID
	firstTime   int64
	stack       profiler.StackID // pretrace: the stack recorded for the block, if any
	label       string
	// window is a gap's place between user lines as its label says it, without
	// the record_function scope ("[no user frame] after a.py:3, before :9"):
	// diffs match phases by it (Site.Window).
	window string
	call   profiler.Frame // gap inside a backward() the agent annotated: the line that called it
}

type origins struct {
	frames    *profiler.Frames
	real      []origin // by StackID
	syn       []synthetic
	synO      []origin
	gapIdx    map[[3]profiler.StackID]int32
	preIdx    map[profiler.StackID]int32
	inFlight  int32             // the synthetic origin of memory in flight in backward (inflight.go); 0 until made
	userIdx   []int8            // by StackID: 0 unknown, 1 reaches user code, 2 does not
	fileNames map[string]string // Options.FileNames
}

func newOrigins(frames *profiler.Frames) *origins {
	return &origins{frames: frames, gapIdx: map[[3]profiler.StackID]int32{}, preIdx: map[profiler.StackID]int32{}}
}

// hasUser reports whether a stack has a frame in user code (cached per stack).
func (o *origins) hasUser(s profiler.StackID) bool {
	if s == 0 {
		return false
	}
	for int(s) >= len(o.userIdx) {
		o.userIdx = append(o.userIdx, 0)
	}
	if o.userIdx[s] == 0 {
		o.userIdx[s] = 2
		if _, ok := o.userFrame(s); ok {
			o.userIdx[s] = 1
		}
	}
	return o.userIdx[s] == 1
}

func (o *origins) at(id int32) *origin {
	if id < 0 {
		return &o.synO[-id-1]
	}
	for int(id) >= len(o.real) {
		o.real = append(o.real, origin{})
	}
	return &o.real[id]
}

func (o *origins) countAlloc(id int32, size int64) {
	x := o.at(id)
	x.allocBytes += size
	x.allocs++
	x.maxAlloc = max(x.maxAlloc, size)
}

func (o *origins) add(s synthetic) int32 {
	o.syn = append(o.syn, s)
	o.synO = append(o.synO, origin{})
	return -int32(len(o.syn))
}

// gapOrigin finds or makes the synthetic origin for one stack (0: none) of a
// gap between two user stacks; gaps between the same pair (every step's
// backward pass) merge.
func (o *origins) gapOrigin(g *gap, stack profiler.StackID) int32 {
	key := [3]profiler.StackID{g.left, g.right, stack}
	if id, ok := o.gapIdx[key]; ok {
		return id
	}
	id := o.add(synthetic{kind: "gap", left: g.left, right: g.right, stack: stack, firstTime: g.firstTime})
	o.gapIdx[key] = id
	return id
}

// addCat counts bytes live at the peak in a memory category.
func (o *origin) addCat(cat string, size int64) {
	if o.cats == nil {
		o.cats = map[string]int64{}
	}
	o.cats[cat] += size
}

// preTrace is the origin of a block allocated before recording began.
func (o *origins) preTrace(stack profiler.StackID) int32 {
	if stack != 0 {
		return int32(stack)
	}
	if id, ok := o.preIdx[stack]; ok {
		return id
	}
	id := o.add(synthetic{kind: "pretrace", label: "[allocated before recording started]"})
	o.preIdx[stack] = id
	return id
}

// names reports whether an origin says where memory came from: a stack with
// a frame in user code, a named phase (a backward pass), or a named tensor,
// but not "allocated before recording started" or library code alone.
func (o *origins) names(id int32) bool {
	if id >= 0 {
		return o.hasUser(profiler.StackID(id))
	}
	switch o.syn[-id-1].kind {
	case "gap", "tensor", "inflight":
		return true
	}
	return false
}

// userFrame returns the innermost frame of a stack in user code.
func (o *origins) userFrame(s profiler.StackID) (profiler.Frame, bool) {
	for _, id := range o.frames.StackAt(s) {
		if f := o.frames.FrameAt(id); profiler.IsUserFile(f.File) {
			return f, true
		}
	}
	return profiler.Frame{}, false
}

// allocLine is the user line of origin id's recorded stack: a real stack's,
// or the stack a block allocated before the trace kept; false for the other
// synthetic origins (gaps, tensor names) and stacks with no user frame.
func (o *origins) allocLine(id int32) (profiler.Frame, bool) {
	if id >= 0 {
		return o.userFrame(profiler.StackID(id))
	}
	if s := o.syn[-id-1]; s.kind == "pretrace" && s.stack != 0 {
		return o.userFrame(s.stack)
	}
	return profiler.Frame{}, false
}

// place names a source line in words ("train.py:31"): by the name the
// caller gave its file (Options.FileNames: "cell [3]" for a notebook cell's
// file), else by the file's base name.
func (o *origins) place(file string, line int) string {
	name, ok := o.fileNames[file]
	if !ok {
		name = filepath.Base(file)
	}
	return fmt.Sprintf("%s:%d", name, line)
}

func (o *origins) placeOf(f profiler.Frame) string { return o.place(f.File, f.Line) }

var trailingStep = regexp.MustCompile(`[_#]?\d+$`)

// label names the synthetic origins once annotations are known. A gap that
// starts inside a scope the agent opened around backward() (named
// "vramscope.backward@FILE:LINE") belongs to that line.
func (o *origins) label(anns []profiler.Annotation) {
	for i := range o.syn {
		s := &o.syn[i]
		if s.kind != "gap" {
			continue
		}
		scopes := openScopes(anns, s.firstTime)
		lf, lok := o.userFrame(s.left)
		rf, rok := o.userFrame(s.right)
		call, ok := backwardCall(scopes)
		if !ok {
			call, ok = o.backwardFromStack(s.left)
		}
		if ok {
			call.Func = "backward"
			if lok && lf.File == call.File {
				call.Func = lf.Func
			} else if rok && rf.File == call.File {
				call.Func = rf.Func
			}
			s.call = call
			s.label = "[backward pass of " + o.placeOf(call) + "]"
			continue
		}
		head, place := "[no user frame]", o.gapPlace(lf, lok, rf, rok)
		if ph := innermostPhase(scopes); ph != "" {
			head = "[no user frame: " + ph + "]"
		}
		s.label = strings.TrimSpace(head + " " + place)
		s.window = strings.TrimSpace("[no user frame] " + place)
	}
}

// gapPlace says where a gap lies between the user lines around it ("after
// a.py:3, before :9"), "" when neither is known.
func (o *origins) gapPlace(lf profiler.Frame, lok bool, rf profiler.Frame, rok bool) string {
	switch {
	case lok && rok && lf.File == rf.File:
		return fmt.Sprintf("after %s, before :%d", o.placeOf(lf), rf.Line)
	case lok && rok:
		return fmt.Sprintf("after %s, before %s", o.placeOf(lf), o.placeOf(rf))
	case lok:
		return "after " + o.placeOf(lf)
	case rok:
		return "before " + o.placeOf(rf)
	}
	return ""
}

// backwardFromStack recognises a gap that autograd opened: the last framed
// allocation before it was made inside torch's backward() (the seed gradient
// of _make_grads), so the frameless run after it is that call's backward pass,
// and the user line that called backward() owns it.
func (o *origins) backwardFromStack(left profiler.StackID) (profiler.Frame, bool) {
	inBackward := false
	for _, id := range o.frames.StackAt(left) { // innermost first
		f := o.frames.FrameAt(id)
		if f.Func == "backward" && (strings.HasSuffix(f.File, "torch/autograd/__init__.py") || strings.HasSuffix(f.File, "torch/_tensor.py")) {
			inBackward = true
			continue
		}
		if inBackward && profiler.IsUserFile(f.File) {
			return profiler.Frame{File: f.File, Line: f.Line}, true
		}
	}
	return profiler.Frame{}, false
}

// BackwardScope prefixes the record_function scope the agent (jupyter/vramscope)
// opens around every backward() call: "vramscope.backward@FILE:LINE".
const BackwardScope = "vramscope.backward@"

// backwardCall finds the innermost open backward scope and the line it names.
func backwardCall(scopes []string) (profiler.Frame, bool) {
	for i := len(scopes) - 1; i >= 0; i-- {
		rest, ok := strings.CutPrefix(scopes[i], BackwardScope)
		if !ok {
			continue
		}
		colon := strings.LastIndexByte(rest, ':')
		if colon <= 0 {
			continue
		}
		line, err := strconv.Atoi(rest[colon+1:])
		if err != nil || line <= 0 {
			continue
		}
		return profiler.Frame{File: rest[:colon], Line: line}, true
	}
	return profiler.Frame{}, false
}

// openScopes lists the record_function scopes open at time t, outermost first.
func openScopes(anns []profiler.Annotation, t int64) []string {
	var open []string
	for _, a := range anns {
		if a.TimeUS > t {
			break
		}
		if a.Start {
			open = append(open, a.Name)
			continue
		}
		for i := len(open) - 1; i >= 0; i-- {
			if open[i] == a.Name {
				open = append(open[:i], open[i+1:]...)
				break
			}
		}
	}
	return open
}

// innermostPhase names the innermost open scope without a trailing step
// number (train_step_3 -> train_step).
func innermostPhase(scopes []string) string {
	if len(scopes) == 0 {
		return ""
	}
	return trailingStep.ReplaceAllString(scopes[len(scopes)-1], "")
}

// path returns an origin's frames root first, as a flame graph draws them.
func (o *origins) path(id int32) []profiler.Frame {
	if id >= 0 {
		return o.stackPath(profiler.StackID(id))
	}
	s := o.syn[-id-1]
	window := profiler.Frame{Func: s.label}
	if s.kind != "gap" {
		return []profiler.Frame{window}
	}
	l, r := o.stackPath(s.left), o.stackPath(s.right)
	var out []profiler.Frame
	for i := 0; i < len(l) && i < len(r) && l[i] == r[i]; i++ {
		out = append(out, l[i])
	}
	if len(out) == 0 && len(l) > 0 && s.right == 0 {
		out = l[:1]
	}
	if s.call.File != "" {
		out = append(out, s.call)
	}
	out = append(out, window)
	if s.stack == 0 {
		return append(out, profiler.Frame{Func: noStack})
	}
	return append(out, o.stackPath(s.stack)...)
}

// noStack names allocations recorded without any frame.
const noStack = "[no Python stack: autograd or C++ thread]"

func (o *origins) stackPath(s profiler.StackID) []profiler.Frame {
	ids := o.frames.StackAt(s)
	out := make([]profiler.Frame, len(ids))
	for i, id := range ids {
		out[len(ids)-1-i] = o.frames.FrameAt(id)
	}
	return out
}

// each visits every origin that saw any allocation or holds any bytes.
func (o *origins) each(fn func(id int32, x *origin)) {
	for i := range o.real {
		if x := &o.real[i]; x.allocs > 0 || x.peakBytes > 0 || x.currentBytes > 0 {
			fn(int32(i), x)
		}
	}
	for i := range o.synO {
		if x := &o.synO[i]; x.allocs > 0 || x.peakBytes > 0 || x.currentBytes > 0 {
			fn(-int32(i)-1, x)
		}
	}
}
