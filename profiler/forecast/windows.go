package forecast

// windowMaxima splits levels into consecutive windows of size steps (the
// oldest levels that do not fill a window are left out, so the last window
// ends at the last level) and returns each window's centre step, maximum
// of s and maximum reserved bytes.
func windowMaxima(levels []Level, size int, s series) []point {
	var pts []point
	for end := len(levels); end-size >= 0; end -= size {
		w := levels[end-size : end]
		var top, res int64
		for _, l := range w {
			top, res = max(top, s.value(l)), max(res, l.Reserved)
		}
		centre := float64(w[0].Step+w[len(w)-1].Step) / 2
		pts = append(pts, point{x: centre, y: float64(top), r: float64(res)})
	}
	for i, j := 0, len(pts)-1; i < j; i, j = i+1, j-1 {
		pts[i], pts[j] = pts[j], pts[i]
	}
	return pts
}

// windowSize is the levels per window for a span of n levels.
func (p Params) windowSize(n int) int {
	return max(p.MinWindowSteps, n/p.Windows)
}

// maxGapShare bounds cacheGap as a share of the capacity. The allocator
// fails when reserved, not the peak, reaches a cap it cannot free below: the
// H200 leak (testdata/leak.json) ran out with its peak 306 MiB (10%) under
// its 3 GiB cap and reserved at the cap, a gap it held all run. A much
// larger cache is mostly free segments that the allocator releases before
// it fails (the varlen run held 33 GiB reserved for 6 GiB peaks, uncapped),
// so no more than 15% of the capacity counts.
const maxGapShare = 0.15

// cacheGap is what the caching allocator holds beyond the step peak in the
// last windows: the median of reserved minus peak over pts' last third, at
// least 0 and at most maxGapShare of capacity. The peak's trend is
// projected to the capacity less this gap.
func cacheGap(pts []point, capacity int64) int64 {
	last := thirds(pts)[2]
	gaps := make([]float64, len(last))
	for i, p := range last {
		gaps[i] = max(p.r-p.y, 0)
	}
	return min(int64(median(gaps)), int64(maxGapShare*float64(capacity)))
}
