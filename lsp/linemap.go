package lsp

// linemap.go follows the lines a snapshot recorded through the user's edits.
// A snapshot names file:line; the editor's buffer moves on (lines inserted
// above, a function moved, a line rewritten). A lineMap keeps, for each line
// of the buffer, the recorded line it came from: each edit re-links only the
// lines it replaced (by their text, so a line typed again is the same line),
// and a repair pass gives back lines whose text returns (undo, a cut and
// paste of a function) their recorded line.

import "strings"

// origin is where one buffer line came from.
type origin struct {
	line   int  // 1-based line of the recorded source; 0: none (a line the user wrote)
	edited bool // it came from that line, but its text differs from the recorded one
}

// lineMap maps the lines of a recorded source (base) to the buffer's (cur).
type lineMap struct {
	base   []string
	cur    []string
	origin []origin // one per line of cur
	at     []int    // recorded line-1 -> buffer line-1, or -1; rebuilt after each edit
}

// newLineMap links a buffer to the recorded source it may have been edited from.
func newLineMap(base, cur []string) *lineMap {
	m := &lineMap{base: base}
	m.cur = append([]string(nil), cur...)
	m.origin = make([]origin, len(cur))
	start := make([]origin, len(base))
	for i := range base {
		start[i] = origin{line: i + 1}
	}
	copy(m.origin, m.link(base, start, cur))
	m.settle()
	return m
}

// replace applies one edit: buffer lines [start, end) (0-based) become repl.
func (m *lineMap) replace(start, end int, repl []string) {
	start, end = max(0, min(start, len(m.cur))), max(0, min(end, len(m.cur)))
	end = max(start, end)
	linked := m.link(m.cur[start:end], m.origin[start:end], repl)
	m.cur = splice(m.cur, start, end, repl)
	m.origin = splice(m.origin, start, end, linked)
	m.settle()
}

func splice[T any](s []T, start, end int, repl []T) []T {
	out := make([]T, 0, len(s)-(end-start)+len(repl))
	out = append(out, s[:start]...)
	out = append(out, repl...)
	return append(out, s[end:]...)
}

// toCurrent is the buffer line (1-based) that recorded line holds now, and
// whether it was edited; false when the line is gone.
func (m *lineMap) toCurrent(recorded int) (int, bool, bool) {
	if recorded < 1 || recorded > len(m.at) || m.at[recorded-1] < 0 {
		return 0, false, false
	}
	i := m.at[recorded-1]
	return i + 1, m.origin[i].edited, true
}

// toRecorded is the recorded line a buffer line (1-based) came from.
func (m *lineMap) toRecorded(line int) (int, bool, bool) {
	if line < 1 || line > len(m.origin) || m.origin[line-1].line == 0 {
		return 0, false, false
	}
	o := m.origin[line-1]
	return o.line, o.edited, true
}

// link gives the lines of repl the origins of the old lines they keep: equal
// text keeps its line; in a stretch that changed, a line like an old one is
// that line, edited; a line rewritten beyond that loses its recorded line
// (its figures were about other text) until its text returns.
func (m *lineMap) link(old []string, from []origin, repl []string) []origin {
	out := make([]origin, len(repl))
	pairs := matchLines(keys(old), keys(repl))
	pi, pj := 0, 0
	for _, p := range append(pairs, [2]int{len(old), len(repl)}) {
		pairEdited(old[pi:p[0]], from[pi:p[0]], repl[pj:p[1]], out[pj:p[1]])
		if p[0] < len(old) {
			out[p[1]] = from[p[0]]
		}
		pi, pj = p[0]+1, p[1]+1
	}
	return out
}

// pairEdited links the lines of a changed stretch to the old lines they
// resemble, in order.
func pairEdited(old []string, from []origin, repl []string, out []origin) {
	i := 0
	for j := range repl {
		for k := i; k < len(old); k++ {
			if similar(old[k], repl[j]) {
				out[j], i = from[k], k+1
				break
			}
		}
	}
}

// similar says two lines share most of their text (a common start and end
// covering half of the longer one): an edit of a line, not a new one.
func similar(a, b string) bool {
	a, b = key(a), key(b)
	n := max(len(a), len(b))
	if n == 0 {
		return false
	}
	p, s := commonEnds([]byte(a), []byte(b))
	return 2*(p+s) >= n
}

// commonEnds is how many items a and b share at their start, and then at
// their end (not overlapping the start).
func commonEnds[T comparable](a, b []T) (start, end int) {
	for start < len(a) && start < len(b) && a[start] == b[start] {
		start++
	}
	for end < len(a)-start && end < len(b)-start && a[len(a)-1-end] == b[len(b)-1-end] {
		end++
	}
	return start, end
}

// settle marks edited lines (their text differs from the recorded line's),
// gives lost lines back (repair), and rebuilds the index.
func (m *lineMap) settle() {
	m.repair()
	m.at = make([]int, len(m.base))
	for i := range m.at {
		m.at[i] = -1
	}
	for i, o := range m.origin {
		if o.line < 1 || o.line > len(m.base) || m.at[o.line-1] >= 0 {
			m.origin[i] = origin{} // a line claimed twice (a copied line) stays with the first
			continue
		}
		m.at[o.line-1] = i
		m.origin[i].edited = key(m.cur[i]) != key(m.base[o.line-1])
	}
}

// key is what two lines are compared by: their text without the indentation
// and line ending (re-indenting a statement into a block keeps it).
func key(line string) string { return strings.TrimSpace(line) }

func keys(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = key(l)
	}
	return out
}
