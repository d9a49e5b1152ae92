package lsp

// linediff.go matches the lines of two texts: the longest common subsequence
// for a small stretch, lines found once in each text as anchors for a large
// one (patience diff), and, for lines an edit left without a recorded line,
// the recorded lines that no buffer line holds.

import "sort"

// maxLCSCells bounds the table of one longest-common-subsequence run (4 bytes
// a cell): stretches larger than this are split at lines unique to both sides.
const maxLCSCells = 1 << 18

// matchLines pairs equal lines of a and b, in order, as indices (a's, b's).
func matchLines(a, b []string) [][2]int {
	var out [][2]int
	matchInto(a, b, 0, 0, &out)
	return out
}

func matchInto(a, b []string, oa, ob int, out *[][2]int) {
	p, s := commonEnds(a, b)
	for k := 0; k < p; k++ {
		*out = append(*out, [2]int{oa + k, ob + k})
	}
	a, b, oa, ob = a[p:], b[p:], oa+p, ob+p
	ma, mb := a[:len(a)-s], b[:len(b)-s]
	switch {
	case len(ma) == 0 || len(mb) == 0:
	case len(ma)*len(mb) <= maxLCSCells:
		lcs(ma, mb, oa, ob, out)
	default:
		anchored(ma, mb, oa, ob, out)
	}
	for k := 0; k < s; k++ {
		*out = append(*out, [2]int{oa + len(ma) + k, ob + len(mb) + k})
	}
}

// lcs appends the pairs of a longest common subsequence of a and b.
func lcs(a, b []string, oa, ob int, out *[][2]int) {
	n, m := len(a), len(b)
	t := make([]int32, (n+1)*(m+1)) // t[i*(m+1)+j]: the LCS length of a[i:], b[j:]
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				t[i*(m+1)+j] = t[(i+1)*(m+1)+j+1] + 1
			default:
				t[i*(m+1)+j] = max(t[(i+1)*(m+1)+j], t[i*(m+1)+j+1])
			}
		}
	}
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case a[i] == b[j]:
			*out = append(*out, [2]int{oa + i, ob + j})
			i, j = i+1, j+1
		case t[(i+1)*(m+1)+j] >= t[i*(m+1)+j+1]:
			i++
		default:
			j++
		}
	}
}

// anchored matches the lines found exactly once in a and once in b, keeps the
// longest run of them in the same order, and matches between them.
func anchored(a, b []string, oa, ob int, out *[][2]int) {
	count := map[string][2]int{}
	for _, l := range a {
		c := count[l]
		c[0]++
		count[l] = c
	}
	at := map[string]int{}
	for j, l := range b {
		c := count[l]
		c[1]++
		count[l] = c
		at[l] = j
	}
	var cand [][2]int
	for i, l := range a {
		if c := count[l]; c[0] == 1 && c[1] == 1 {
			cand = append(cand, [2]int{i, at[l]})
		}
	}
	pi, pj := 0, 0
	for _, p := range increasing(cand) {
		matchInto(a[pi:p[0]], b[pj:p[1]], oa+pi, ob+pj, out)
		*out = append(*out, [2]int{oa + p[0], ob + p[1]})
		pi, pj = p[0]+1, p[1]+1
	}
	if pi > 0 {
		matchInto(a[pi:], b[pj:], oa+pi, ob+pj, out)
	}
}

// increasing is the longest subsequence of pairs (sorted by their first)
// whose seconds increase too (patience sorting).
func increasing(pairs [][2]int) [][2]int {
	var tops []int // index into pairs of the smallest tail of each length
	prev := make([]int, len(pairs))
	for k, p := range pairs {
		n := sort.Search(len(tops), func(x int) bool { return pairs[tops[x]][1] >= p[1] })
		prev[k] = -1
		if n > 0 {
			prev[k] = tops[n-1]
		}
		if n == len(tops) {
			tops = append(tops, k)
		} else {
			tops[n] = k
		}
	}
	if len(tops) == 0 {
		return nil
	}
	out := make([][2]int, len(tops))
	for k, x := len(tops)-1, tops[len(tops)-1]; k >= 0; k, x = k-1, prev[x] {
		out[k] = pairs[x]
	}
	return out
}

// repair gives buffer lines without a recorded line the recorded lines no
// buffer line holds: first in place (between the recorded lines of their
// neighbours: an undone deletion), then anywhere for text found once on each
// side, with its neighbours (a function cut and pasted elsewhere).
func (m *lineMap) repair() {
	m.releaseEdited()
	used := make([]bool, len(m.base))
	for _, o := range m.origin {
		if o.line > 0 && o.line <= len(m.base) {
			used[o.line-1] = true
		}
	}
	m.fillGaps(used)
	m.matchMoved(used)
}

// releaseEdited unlinks a line taken for an edit of a recorded line when an
// exact match exists: the recorded line's text is back on a line without a
// recorded line, or the line's own text is a recorded line no line holds (an
// edit paired two lines that only looked alike: import time, import torch).
func (m *lineMap) releaseEdited() {
	free, unheld := map[string]bool{}, map[string]bool{}
	held := make([]bool, len(m.base))
	for i, o := range m.origin {
		if o.line == 0 {
			free[key(m.cur[i])] = true
		} else if o.line <= len(m.base) {
			held[o.line-1] = true
		}
	}
	for r, h := range held {
		if !h {
			unheld[key(m.base[r])] = true
		}
	}
	for i, o := range m.origin {
		if o.line == 0 || o.line > len(m.base) {
			continue
		}
		k, was := key(m.cur[i]), key(m.base[o.line-1])
		if k != was && (free[was] || unheld[k]) {
			m.origin[i] = origin{}
		}
	}
}

// fillGaps matches each run of unlinked buffer lines with the unheld recorded
// lines between its neighbours' recorded lines.
func (m *lineMap) fillGaps(used []bool) {
	prev := 0
	for i := 0; i < len(m.cur); {
		if m.origin[i].line > 0 {
			prev = m.origin[i].line
			i++
			continue
		}
		j := i
		for j < len(m.cur) && m.origin[j].line == 0 {
			j++
		}
		next := len(m.base) + 1
		if j < len(m.cur) {
			next = m.origin[j].line
		}
		var free []int // recorded lines (0-based) in the gap
		for r := prev; r < next-1 && prev < next; r++ {
			if !used[r] {
				free = append(free, r)
			}
		}
		if len(free) > 0 {
			cand := make([]string, len(free))
			for k, r := range free {
				cand[k] = key(m.base[r])
			}
			for _, p := range matchLines(keys(m.cur[i:j]), cand) {
				m.origin[i+p[0]] = origin{line: free[p[1]] + 1}
				used[free[p[1]]] = true
			}
		}
		i = j
	}
}

// matchMoved links unlinked buffer lines whose text is found once among the
// unheld recorded lines and once among the unlinked buffer lines, then their
// equal neighbours on both sides.
func (m *lineMap) matchMoved(used []bool) {
	count := map[string][2]int{}
	where := map[string]int{}
	for r, l := range m.base {
		if k := key(l); !used[r] && k != "" {
			c := count[k]
			c[0]++
			count[k], where[k] = c, r
		}
	}
	for i, l := range m.cur {
		if k := key(l); m.origin[i].line == 0 && k != "" {
			c := count[k]
			c[1]++
			count[k] = c
		}
	}
	for i, l := range m.cur {
		k := key(l)
		if c := count[k]; m.origin[i].line != 0 || c[0] != 1 || c[1] != 1 || used[where[k]] {
			continue
		}
		m.link1(i, where[k], used)
		for d := 1; m.grow(i+d, where[k]+d, used); d++ {
		}
		for d := 1; m.grow(i-d, where[k]-d, used); d++ {
		}
	}
}

func (m *lineMap) link1(i, r int, used []bool) {
	m.origin[i] = origin{line: r + 1}
	used[r] = true
}

// grow links buffer line i to recorded line r when both are free and equal.
func (m *lineMap) grow(i, r int, used []bool) bool {
	if i < 0 || i >= len(m.cur) || r < 0 || r >= len(m.base) || m.origin[i].line != 0 || used[r] || key(m.cur[i]) != key(m.base[r]) {
		return false
	}
	m.link1(i, r, used)
	return true
}
