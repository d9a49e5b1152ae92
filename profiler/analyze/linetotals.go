package analyze

import "sort"

// lineTotal is the blocks of one source line added up.
type lineTotal struct {
	file, fn string
	line     int
	bytes, n int64
	direct   bool // activations: made by the user's line itself, not inside a model
}

type fileLine struct {
	file string
	line int
}

// lineTotals adds blocks up by source line.
type lineTotals map[fileLine]*lineTotal

// add counts one block of size bytes at file:line (in function fn) and
// returns that line's total.
func (m lineTotals) add(file string, line int, fn string, size int64) *lineTotal {
	k := fileLine{file, line}
	x := m[k]
	if x == nil {
		x = &lineTotal{file: file, line: line, fn: fn}
		m[k] = x
	}
	x.bytes += size
	x.n++
	return x
}

// top is the n largest lines, largest first (ties by file, then line).
func (m lineTotals) top(n int) []*lineTotal {
	l := make([]*lineTotal, 0, len(m))
	for _, x := range m {
		l = append(l, x)
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].bytes != l[j].bytes {
			return l[i].bytes > l[j].bytes
		}
		if l[i].file != l[j].file {
			return l[i].file < l[j].file
		}
		return l[i].line < l[j].line
	})
	return l[:min(n, len(l))]
}
