package analyze

// allocTimes answers "when is the first allocation of a kind after t" (the
// next frameless allocation: backward has begun; the next one from user
// code) from the level log itself, instead of a list of times that would
// take 8 bytes an allocation: each group of the log records the first group
// at or after it holding an allocation of the kind, so a question decodes
// at most two groups.
type allocTimes struct {
	lv    levels
	is    func(logEntry) bool
	next  []int32 // by group: the first group at or after it with one; -1: none
	first int64   // the first one's time (valid when next[0] >= 0)
	// The last answer: no allocation of the kind among entries from..hit-1,
	// and hit is one (or the log's end). Classifying a whole log asks about
	// every allocation in turn, and the answers move by a few entries.
	from, hit int
}

// newAllocTimes indexes the allocations of the log that is picks out.
func newAllocTimes(lv levels, is func(logEntry) bool) *allocTimes {
	groups := len(lv.log.groups)
	at := &allocTimes{lv: lv, is: is, next: make([]int32, groups), from: -1}
	has := make([]bool, groups)
	for i := 0; i < lv.log.len(); i++ {
		if g := i / logGroup; !has[g] && is(lv.log.at(i)) {
			has[g] = true
		}
	}
	n := int32(-1)
	for g := groups - 1; g >= 0; g-- {
		if has[g] {
			n = int32(g)
		}
		at.next[g] = n
	}
	if groups > 0 && at.next[0] >= 0 {
		i, _ := at.inGroup(int(at.next[0]), 0)
		at.first = lv.time(i)
	}
	return at
}

// any says whether the log holds one at all.
func (a *allocTimes) any() bool { return len(a.next) > 0 && a.next[0] >= 0 }

// after is the first time later than t and not past limit.
func (a *allocTimes) after(t, limit int64) (int64, bool) {
	i := a.lv.idx(t) + 1 // the first entry later than t
	j := a.find(i)
	if j < a.lv.log.len() {
		if found := a.lv.time(j); found <= limit {
			return found, true
		}
	}
	return 0, false
}

// find is the index of the first one at or after entry i (the log's length if none).
func (a *allocTimes) find(i int) int {
	n := a.lv.log.len()
	switch {
	case i >= n:
		return n
	case a.from >= 0 && i >= a.from && i <= a.hit:
		return a.hit
	case a.from >= 0 && i < a.from && a.from-i <= logGroup:
		j := i
		for j < a.from && !a.is(a.lv.log.at(j)) {
			j++
		}
		if j < a.from {
			a.hit = j
		}
		a.from = i
		return a.hit
	}
	g := i / logGroup
	j, ok := a.inGroup(g, i)
	if !ok {
		j = n
		if g+1 < len(a.next) && a.next[g+1] >= 0 {
			j, _ = a.inGroup(int(a.next[g+1]), 0)
		}
	}
	a.from, a.hit = i, j
	return j
}

// inGroup is the index of the first one in group g at or after entry from.
func (a *allocTimes) inGroup(g, from int) (int, bool) {
	for i := max(from, g*logGroup); i < min((g+1)*logGroup, a.lv.log.len()); i++ {
		if a.is(a.lv.log.at(i)) {
			return i, true
		}
	}
	return 0, false
}
