package torchsnap

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/profiler"
)

// pyFacts prints, as one JSON object keyed by path, what CPython finds in each
// snapshot named on the command line, read the way PyTorch's own
// torch/cuda/_memory_viz.py reads it:
//
//   - traces: per device_traces entry (by device), its length, per-action
//     counts (collections.Counter(e["action"])), a SHA-256 over every event
//     (see eventLine), and a sample of events spelled out, frames included;
//   - segments: every segment's fields and block count;
//   - blocks: every block with its address (for the pre-2.1 layout, the
//     previous block's end), size, requested size and stack, the last two as
//     _block_extra does: "frames"/"requested_size" when the block has frames,
//     else history[0] ("newest first"), else no stack and size as requested
//     (not compared for free blocks);
//   - states: per block state, [count, sum of sizes];
//   - annotations in time order, and the scalar allocator settings.
//
// Stacks are given as indices into a per-file stacks table.
const pyFacts = `
import collections, hashlib, json, pickle, sys

ALIAS = {'free': 'free_requested', 'annotate': 'user_defined'}
KNOWN = {'alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free',
         'segment_map', 'segment_unmap', 'snapshot', 'oom', 'user_defined'}

def action(a):
    a = ALIAS.get(a, a)
    return a if a in KNOWN else 'unknown'

def num(v):
    return v if type(v) is int and v >= 0 else 0

def snum(v):
    return v if type(v) is int else 0

def frames_key(frames):
    return '\x1f'.join('%s\x1e%d\x1e%s' % (f.get('filename', ''), f.get('line', 0), f.get('name', '')) for f in frames or [])

def facts(root):
    stacks, stack_ix = [], {}
    def stack(frames):
        k = frames_key(frames)
        if k not in stack_ix:
            stack_ix[k] = len(stacks)
            stacks.append([[f.get('filename', ''), f.get('line', 0), f.get('name', '')] for f in frames or []])
        return stack_ix[k]
    if isinstance(root, list):
        root = {'segments': root}
    out = {'traces': [], 'segments': [], 'blocks': [], 'states': {}, 'annotations': [], 'settings': {}, 'legacy': False}
    for trace in root.get('device_traces', []):
        h = hashlib.sha256()
        counts = collections.Counter()
        sample = []
        step = max(1, len(trace) // 40)
        for i, e in enumerate(trace):
            a = action(e['action'])
            counts[a] += 1
            um = e.get('user_metadata', '')
            um = um if type(um) is str else ''
            line = '%s|%d|%d|%d|%d|%d|%s|%s\n' % (a, num(e.get('addr', 0)), num(e.get('size', 0)), snum(e.get('stream')),
                snum(e.get('time_us')), num(e.get('device_free', 0)), um, frames_key(e.get('frames')))
            h.update(line.encode('utf-8', 'surrogatepass'))
            if i % step == 0 or i == len(trace) - 1 or a not in ('alloc', 'free_requested', 'free_completed'):
                sample.append({'i': i, 'action': a, 'addr': num(e.get('addr', 0)), 'size': num(e.get('size', 0)),
                               'device_free': num(e.get('device_free', 0)), 'stack': stack(e.get('frames'))})
        out['traces'].append({'len': len(trace), 'actions': dict(counts), 'digest': h.hexdigest(), 'sample': sample})
    for si, s in enumerate(root.get('segments', [])):
        pool = s.get('segment_pool_id', (0, 0))
        out['segments'].append([s.get('device', 0), s.get('address', 0), s.get('total_size', 0), s.get('allocated_size', 0),
            s.get('active_size', 0), s.get('requested_size', 0), s.get('stream', 0), s.get('segment_type', ''),
            pool[0], pool[1], bool(s.get('is_expandable', False)), len(s.get('blocks', []))])
        addr = s.get('address', 0)
        for b in s.get('blocks', []):
            addr = b.get('address', addr)
            kind = 'modern'
            if 'frames' in b:
                frames, real = b['frames'], b['requested_size']
            elif b.get('history'):
                out['legacy'] = True
                h0 = b['history'][0]
                frames, real = h0.get('frames', []), h0['real_size']
                kind = 'history' if len(b['history']) == 1 else 'history_many'
            else:
                frames, real = [], b.get('requested_size', b['size'])
                kind = 'no_frames' if 'requested_size' in b else 'no_history'
                if kind == 'no_history' and b['state'] == 'inactive':
                    # Nothing is requested of a free block: any reading will do.
                    kind, real = 'no_history_inactive', -1
            out['blocks'].append({'seg': si, 'addr': addr, 'size': b['size'], 'requested': real,
                                  'state': b['state'], 'stack': stack(frames), 'kind': kind})
            st = out['states'].setdefault(b['state'], [0, 0])
            st[0] += 1
            st[1] += b['size']
            addr += b['size']
    anns = [a for a in root.get('external_annotations', []) if isinstance(a, dict)]
    anns = sorted(anns, key=lambda a: a.get('time_us', 0))
    out['annotations'] = [[a.get('name', ''), a.get('stage') == 'START', a.get('device', 0), a.get('time_us', 0)] for a in anns]
    st = root.get('allocator_settings', {})
    out['settings'] = {k: v for k, v in st.items() if isinstance(v, (str, int, float, bool)) or v is None}
    out['stacks'] = stacks
    return out

res = {}
for path in sys.argv[1:]:
    with open(path, 'rb') as f:
        res[path] = facts(pickle.load(f))
json.dump(res, sys.stdout)
`

type pyTrace struct {
	Len     int            `json:"len"`
	Actions map[string]int `json:"actions"`
	Digest  string         `json:"digest"`
	Sample  []struct {
		I          int    `json:"i"`
		Action     string `json:"action"`
		Addr       uint64 `json:"addr"`
		Size       uint64 `json:"size"`
		DeviceFree uint64 `json:"device_free"`
		Stack      int    `json:"stack"`
	} `json:"sample"`
}

type pyBlock struct {
	Seg       int    `json:"seg"`
	Addr      uint64 `json:"addr"`
	Size      uint64 `json:"size"`
	Requested int64  `json:"requested"` // -1: not compared
	State     string `json:"state"`
	Stack     int    `json:"stack"`
	Kind      string `json:"kind"`
}

type snapFacts struct {
	Traces      []pyTrace            `json:"traces"`
	Segments    [][]any              `json:"segments"`
	Blocks      []pyBlock            `json:"blocks"`
	States      map[string][2]uint64 `json:"states"`
	Annotations [][]any              `json:"annotations"`
	Settings    map[string]any       `json:"settings"`
	Stacks      [][][]any            `json:"stacks"`
	Legacy      bool                 `json:"legacy"`
}

// pythonFacts runs pyFacts over paths in one python3 process.
func pythonFacts(paths []string) (map[string]*snapFacts, error) {
	cmd := exec.Command("python3", append([]string{"-c", pyFacts}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("python3: %v\n%s", err, stderr.String())
	}
	d := json.NewDecoder(bytes.NewReader(out))
	d.UseNumber()
	res := map[string]*snapFacts{}
	if err := d.Decode(&res); err != nil {
		return nil, fmt.Errorf("python3 output: %v", err)
	}
	return res, nil
}

// eventLine is the Go side of pyFacts' per-event line.
func eventLine(fr *profiler.Frames, e *profiler.Event) string {
	return fmt.Sprintf("%s|%d|%d|%d|%d|%d|%s|%s\n", e.Action, e.Addr, e.Size, e.Stream, e.TimeUS, e.DeviceFree, e.UserMeta, stackKey(fr, e.Stack))
}

func stackKey(fr *profiler.Frames, s profiler.StackID) string {
	var b strings.Builder
	for i, id := range fr.StackAt(s) {
		f := fr.FrameAt(id)
		if i > 0 {
			b.WriteByte('\x1f')
		}
		b.WriteString(f.File + "\x1e" + strconv.Itoa(f.Line) + "\x1e" + f.Func)
	}
	return b.String()
}

// pyStackKey spells a pyFacts stack the way stackKey does.
func pyStackKey(st [][]any) string {
	var b strings.Builder
	for i, f := range st {
		if i > 0 {
			b.WriteByte('\x1f')
		}
		fmt.Fprintf(&b, "%s\x1e%s\x1e%s", f[0], f[1], f[2])
	}
	return b.String()
}

// goTrace is what the Go decoder streamed for one trace.
type goTrace struct {
	events  []profiler.Event
	actions map[string]int
}

// collector gathers every streamed event per trace number.
type collector struct {
	fr     *profiler.Frames
	traces map[int]*goTrace
	h      map[int]hashWriter
}

type hashWriter interface {
	Write([]byte) (int, error)
	Sum([]byte) []byte
}

func newCollector(fr *profiler.Frames) *collector {
	return &collector{fr: fr, traces: map[int]*goTrace{}, h: map[int]hashWriter{}}
}

func (c *collector) onEvent(trace int, e *profiler.Event) error {
	g := c.traces[trace]
	if g == nil {
		g = &goTrace{actions: map[string]int{}}
		c.traces[trace] = g
		c.h[trace] = sha256.New()
	}
	if e.Seq != int64(len(g.events)) {
		return fmt.Errorf("trace %d: event Seq %d, want %d", trace, e.Seq, len(g.events))
	}
	g.events = append(g.events, *e)
	g.actions[e.Action.String()]++
	c.h[trace].Write([]byte(eventLine(c.fr, e)))
	return nil
}

func (c *collector) digest(trace int) string {
	if h, ok := c.h[trace]; ok {
		return hex.EncodeToString(h.Sum(nil))
	}
	return ""
}
