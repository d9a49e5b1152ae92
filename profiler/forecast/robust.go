package forecast

import "sort"

// point is one window: its centre step, its maximum peak and its maximum
// reserved bytes.
type point struct {
	x float64
	y float64
	r float64
}

// theilSen is the median of the pairwise slopes of pts, and the intercept
// that is the median of y - slope·x.
func theilSen(pts []point) (slope, intercept float64) {
	var slopes []float64
	for i := range pts {
		for j := i + 1; j < len(pts); j++ {
			if dx := pts[j].x - pts[i].x; dx != 0 {
				slopes = append(slopes, (pts[j].y-pts[i].y)/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0, 0
	}
	slope = median(slopes)
	rest := make([]float64, len(pts))
	for i, p := range pts {
		rest[i] = p.y - slope*p.x
	}
	return slope, median(rest)
}

// kendallTau is (concordant - discordant) / pairs of pts ordered by x: 1 when
// every later window is higher, 0 for no trend.
func kendallTau(pts []point) float64 {
	var s, n int
	for i := range pts {
		for j := i + 1; j < len(pts); j++ {
			n++
			switch d := pts[j].y - pts[i].y; {
			case d > 0:
				s++
			case d < 0:
				s--
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(s) / float64(n)
}

// spread is the robust spread of pts around the line: 1.4826 times the
// median absolute residual (a normal noise's standard deviation).
func spread(pts []point, slope, intercept float64) float64 {
	res := make([]float64, len(pts))
	for i, p := range pts {
		r := p.y - (slope*p.x + intercept)
		res[i] = max(r, -r)
	}
	return 1.4826 * median(res)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
