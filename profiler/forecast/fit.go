package forecast

import "fmt"

// fit is the span's trend in series s when it shows sustained growth, else
// why not.
func (p Params) fit(span []Level, capacity int64, s series) (trend, string) {
	size := p.windowSize(stepsIn(span))
	pts := windowMaxima(span, size, s)
	if len(pts) < 6 {
		return trend{}, fmt.Sprintf("%d windows of %d steps, fewer than 6", len(pts), size)
	}
	slope, intercept := theilSen(pts)
	if slope <= 0 {
		return trend{}, "the " + s.name + " does not rise"
	}
	ev := Evidence{Series: s.name, FromStep: span[0].Step, ToStep: span[len(span)-1].Step, Windows: len(pts), WindowSteps: size,
		Consistency: kendallTau(pts)}
	if ev.Consistency < p.MinConsistency {
		return trend{}, fmt.Sprintf("the window maxima rise inconsistently (tau %.2f < %.2f)", ev.Consistency, p.MinConsistency)
	}
	for i, third := range thirds(pts) {
		ev.ThirdSlopes[i], _ = theilSen(third)
		if ev.ThirdSlopes[i] < p.MinThirdShare*slope {
			return trend{}, fmt.Sprintf("third %d of steps %d-%d rises %.0f B/step, under %.0f%% of the span's %.0f: not sustained",
				i+1, ev.FromStep, ev.ToStep, ev.ThirdSlopes[i], 100*p.MinThirdShare, slope)
		}
	}
	ev.Rise = int64(slope * (pts[len(pts)-1].x - pts[0].x))
	ev.Noise = int64(spread(pts, slope, intercept))
	need := max(p.MinRise, int64(p.MinRiseShare*float64(capacity)), int64(p.NoiseFactor*float64(ev.Noise)))
	if ev.Rise < need {
		return trend{}, fmt.Sprintf("a rise of %d bytes over steps %d-%d, under the %d needed", ev.Rise, ev.FromStep, ev.ToStep, need)
	}
	peaks := windowMaxima(span, size, peakSeries)
	ev.CacheGap = cacheGap(peaks, capacity)
	return trend{slope: slope, intercept: levelIntercept(peaks, slope), from: span[0], to: span[len(span)-1], ev: ev}, ""
}

// thirds splits pts into three consecutive parts (the last takes the rest).
func thirds(pts []point) [3][]point {
	n := len(pts) / 3
	return [3][]point{pts[:n], pts[n : 2*n], pts[2*n:]}
}

// levelIntercept is the intercept of the step peaks' window maxima at slope
// (the median of y - slope·x): a trend found in either series is projected
// from the peaks' level.
func levelIntercept(peaks []point, slope float64) float64 {
	rest := make([]float64, len(peaks))
	for i, p := range peaks {
		rest[i] = p.y - slope*p.x
	}
	return median(rest)
}
