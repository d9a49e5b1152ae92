package analyze

import (
	"encoding/binary"
	"sort"
)

// logEntry is one allocation or free in the level log. T is microseconds
// since the trace's first event (never stepping back), stack the recorded
// stack + 1 for an allocation (so 1 means no frames) and 0 for a free, cur
// the allocated level after it; an allocation's size is its cur minus the
// previous entry's. Back links a free to the allocation it ended: 1 + that
// allocation's index, 0 when it is not in the log (allocated before the trace).
type logEntry struct {
	t     int64
	stack uint32
	cur   int64
	back  int
}

// levelLog holds every allocation and free of a trace, compressed: entries
// go in groups of logGroup, each a run of varints (time, stack and level as
// differences from the entry before, a free's back link as a distance), so
// an entry takes 5-7 bytes instead of the 32 a logEntry takes, and a trace is
// logged whole whatever its length or duration. A group's first time and
// level are kept apart, so any entry is found by decoding one group; the four
// groups decoded last are cached, since readers walk the log in order with
// an occasional jump (to the next backward pass, an anchor).
type levelLog struct {
	pages  [][]byte // varint runs; a group never straddles two pages
	groups []logGroupHead
	n      int
	last   logEntry // the entry added last (the base of the next difference)
	cache  [4]decodedGroup
	next   int // the cache slot to fill next
}

const (
	logGroup = 64
	logPage  = 1 << 20 // the largest page
	// maxEntryBytes bounds one encoded entry: four varints of at most 10 bytes.
	maxEntryBytes = 40
)

// logGroupHead locates a group: its first entry's time and level (the
// differences of its first entry are taken from these), and where its bytes start.
type logGroupHead struct {
	t, cur    int64
	page, off int32
}

type decodedGroup struct {
	g int // group index + 1; 0: empty
	e [logGroup]logEntry
}

func (l *levelLog) len() int { return l.n }

// add appends an entry (e.t never below the last entry's: the caller clamps).
func (l *levelLog) add(e logEntry) {
	if l.n%logGroup == 0 {
		p := len(l.pages) - 1
		if p < 0 || len(l.pages[p])+logGroup*maxEntryBytes > cap(l.pages[p]) {
			size := 64 << 10 // small traces take small pages
			if p >= 0 {
				size = min(logPage, 2*cap(l.pages[p]))
			}
			l.pages = append(l.pages, make([]byte, 0, size))
			p++
		}
		l.groups = append(l.groups, logGroupHead{t: e.t, cur: e.cur, page: int32(p), off: int32(len(l.pages[p]))})
		l.last = logEntry{t: e.t, cur: e.cur}
	}
	p := &l.pages[len(l.pages)-1]
	*p = binary.AppendUvarint(*p, uint64(e.t-l.last.t))
	*p = binary.AppendUvarint(*p, uint64(e.stack))
	*p = binary.AppendVarint(*p, (e.cur-l.last.cur)/512) // blocks are multiples of 512 bytes
	if e.stack == 0 {
		var d uint64
		if e.back > 0 {
			d = uint64(l.n - (e.back - 1))
		}
		*p = binary.AppendUvarint(*p, d)
	}
	l.last = e
	l.n++
}

// at is entry i.
func (l *levelLog) at(i int) logEntry {
	g := i / logGroup
	for k := range l.cache {
		if l.cache[k].g == g+1 {
			return l.cache[k].e[i%logGroup]
		}
	}
	c := &l.cache[l.next]
	l.next = (l.next + 1) % len(l.cache)
	l.decode(g, c)
	return c.e[i%logGroup]
}

// search is the index of the last entry at or before relative time t; -1 if
// none. Times never step back, so the groups' first times are in order and
// one group is decoded.
func (l *levelLog) search(t int64) int {
	g := sort.Search(len(l.groups), func(g int) bool { return l.groups[g].t > t }) - 1
	if g < 0 {
		return -1
	}
	i := g * logGroup
	for i+1 < l.n && i+1 < (g+1)*logGroup && l.at(i+1).t <= t {
		i++
	}
	return i
}

// decode fills c with group g.
func (l *levelLog) decode(g int, c *decodedGroup) {
	h := l.groups[g]
	b := l.pages[h.page][h.off:]
	prev := logEntry{t: h.t, cur: h.cur}
	first := g * logGroup
	for k := 0; k < logGroup && first+k < l.n; k++ {
		dt, n1 := uvarint(b)
		st, n2 := uvarint(b[n1:])
		ux, n3 := uvarint(b[n1+n2:])
		dq := int64(ux >> 1) // binary.AppendVarint's zig-zag
		if ux&1 != 0 {
			dq = ^dq
		}
		b = b[n1+n2+n3:]
		e := logEntry{t: prev.t + int64(dt), stack: uint32(st), cur: prev.cur + dq*512}
		if e.stack == 0 {
			d, n4 := uvarint(b)
			b = b[n4:]
			if d > 0 {
				e.back = first + k - int(d) + 1
			}
		}
		c.e[k] = e
		prev = e
	}
	c.g = g + 1
}

// uvarint is binary.Uvarint with the one-byte case (most differences) first.
func uvarint(b []byte) (uint64, int) {
	if b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return binary.Uvarint(b)
}
