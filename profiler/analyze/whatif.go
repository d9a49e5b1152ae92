package analyze

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// What-if: from analyses of one script run at several sizes (batch size,
// sequence length), fit the peak against the size and predict the largest
// size that fits the device.
//
// Two peaks are fitted: allocated (what tensors hold) and reserved (what the
// caching allocator took from the device, the figure that runs out). The
// model is linear in the size — parameters, gradients and optimizer state are
// the intercept, activations the slope — or quadratic (attention scores
// without a fused kernel grow with the square of the sequence length). With
// four or more sizes "auto" keeps the quadratic term only when it predicts
// held-out points clearly better. The fit's error is its leave-one-out
// error: each size predicted from the others, as a share of what was measured.

// WhatIfPoint is one analysed run.
type WhatIfPoint struct {
	File      string  `json:"file"`
	Size      float64 `json:"size"`
	Allocated int64   `json:"peak_allocated"`
	Reserved  int64   `json:"peak_reserved"`
	// Categories live at the allocated peak, by name.
	Categories map[string]int64 `json:"categories,omitempty"`
}

// Fit is peak ≈ Coef[0] + Coef[1]·size (+ Coef[2]·size²).
type Fit struct {
	Coef []float64 `json:"coef"`
	// LOOError is the largest leave-one-out relative error; -1 when there
	// are too few points to leave one out (two points for a line).
	LOOError float64 `json:"loo_error"`
	// LOOMean is the mean leave-one-out relative error (-1 likewise).
	LOOMean float64 `json:"loo_mean"`
}

// At evaluates the fit.
func (f Fit) At(x float64) float64 {
	y, p := 0.0, 1.0
	for _, c := range f.Coef {
		y += c * p
		p *= x
	}
	return y
}

// CategoryFit is one memory category's bytes at the peak against the size.
type CategoryFit struct {
	Name    string  `json:"name"`
	Fixed   float64 `json:"fixed_bytes"`    // intercept: what does not depend on the size
	PerUnit float64 `json:"per_unit_bytes"` // slope: what one more unit of size adds
}

// Prediction is the fit at one size.
type Prediction struct {
	Size      float64 `json:"size"`
	Allocated int64   `json:"peak_allocated"`
	Reserved  int64   `json:"peak_reserved"`
	Fits      *bool   `json:"fits,omitempty"` // nil: the device's memory is unknown
}

// WhatIf is the answer.
type WhatIf struct {
	Points     []WhatIfPoint `json:"points"`
	Model      string        `json:"model"` // "linear" or "quadratic"
	Allocated  Fit           `json:"allocated"`
	Reserved   Fit           `json:"reserved"`
	Categories []CategoryFit `json:"categories,omitempty"`
	// DeviceMemory and Overhead (CUDA context, libraries: memory the
	// snapshot does not see) bound what the reserved peak may reach.
	DeviceMemory int64 `json:"device_memory,omitempty"`
	Overhead     int64 `json:"overhead"`
	// MaxSize is the largest whole size whose predicted reserved peak, plus
	// the fit's leave-one-out error and the overhead, fits DeviceMemory: the
	// answer. MaxSizeFit is the same by the fitted curve alone, with no margin
	// (on the H200 the size there ran out of memory, the answer ran: see
	// examples/snapshots/whatif/whatif_check.json). 0: not even size 1 fits,
	// or no device memory was given; -1: the peak does not grow with size.
	MaxSize     int64        `json:"max_size"`
	MaxSizeFit  int64        `json:"max_size_fit"`
	Predictions []Prediction `json:"predictions,omitempty"`
	Notes       []string     `json:"notes,omitempty"`
}

// WhatIfOptions tune the fit.
type WhatIfOptions struct {
	Model        string    // "auto" (default), "linear" or "quadratic"
	DeviceMemory int64     // 0: unknown
	Overhead     int64     // memory outside the allocator's reach
	Predict      []float64 // sizes to predict besides the maximum
}

// WhatIfPointOf takes the figures of one analysis: the device with the
// highest allocated peak, its highest reserved level and its categories.
func WhatIfPointOf(r *Result, size float64) WhatIfPoint {
	p := WhatIfPoint{File: r.File, Size: size, Allocated: r.Peak.Bytes}
	for _, d := range r.Devices {
		if d.Device != r.Peak.Device {
			continue
		}
		for _, pt := range d.Timeline.Points {
			p.Reserved = max(p.Reserved, pt.Reserved)
		}
		p.Reserved = max(p.Reserved, d.Allocator.Reserved)
		if len(d.Categories) > 0 {
			p.Categories = map[string]int64{}
			for _, c := range d.Categories {
				p.Categories[c.Name] += c.Bytes
			}
		}
	}
	if p.Reserved < p.Allocated {
		p.Reserved = p.Allocated // a trace without segment events: reserved is not known better
	}
	return p
}

// FitWhatIf fits the points and predicts.
func FitWhatIf(points []WhatIfPoint, opt WhatIfOptions) (*WhatIf, error) {
	if len(points) < 2 {
		return nil, errors.New("what-if needs snapshots at two or more sizes")
	}
	pts := append([]WhatIfPoint(nil), points...)
	sort.Slice(pts, func(i, j int) bool { return pts[i].Size < pts[j].Size })
	for i, p := range pts {
		if !(p.Size > 0) || math.IsInf(p.Size, 0) {
			return nil, fmt.Errorf("%s: size %v is not a positive number", p.File, p.Size)
		}
		if i > 0 && pts[i-1].Size == p.Size {
			return nil, fmt.Errorf("%s and %s have the same size %v: want different sizes", pts[i-1].File, p.File, p.Size)
		}
		if p.Allocated <= 0 {
			return nil, fmt.Errorf("%s: no allocation in the trace, nothing to fit", p.File)
		}
	}
	w := &WhatIf{Points: pts, DeviceMemory: opt.DeviceMemory, Overhead: opt.Overhead}
	xs := make([]float64, len(pts))
	ya := make([]float64, len(pts))
	yr := make([]float64, len(pts))
	for i, p := range pts {
		xs[i], ya[i], yr[i] = p.Size, float64(p.Allocated), float64(p.Reserved)
	}

	deg := 1
	switch opt.Model {
	case "", "auto":
		if len(pts) >= 4 {
			lin, quad := looErr(xs, ya, 1), looErr(xs, ya, 2)
			if quad.max < 0.5*lin.max {
				deg = 2
			}
		} else {
			w.Notes = append(w.Notes, "with fewer than four sizes the fit is a line; give more sizes to test for a quadratic term (attention without a fused kernel)")
		}
	case "linear":
	case "quadratic":
		if len(pts) < 3 {
			return nil, errors.New("a quadratic fit needs three or more sizes")
		}
		deg = 2
	default:
		return nil, fmt.Errorf("unknown model %q: want auto, linear or quadratic", opt.Model)
	}
	w.Model = map[int]string{1: "linear", 2: "quadratic"}[deg]
	var err error
	if w.Allocated, err = fitWithError(xs, ya, deg); err != nil {
		return nil, err
	}
	if w.Reserved, err = fitWithError(xs, yr, deg); err != nil {
		return nil, err
	}
	if w.Allocated.LOOError < 0 {
		w.Notes = append(w.Notes, fmt.Sprintf("%d sizes fit a %s exactly: the error is unknown until another size is recorded",
			len(pts), map[string]string{"linear": "line", "quadratic": "parabola"}[w.Model]))
	}
	w.Categories = fitCategories(pts, xs)

	for _, x := range opt.Predict {
		w.Predictions = append(w.Predictions, w.predict(x))
	}
	w.MaxSize, w.MaxSizeFit = 0, 0
	if opt.DeviceMemory > 0 {
		budget := float64(opt.DeviceMemory - opt.Overhead)
		last := xs[len(xs)-1]
		slope := w.Reserved.Coef[1]
		if deg == 2 {
			slope += 2 * w.Reserved.Coef[2] * last
		}
		if slope <= 0 {
			w.MaxSize, w.MaxSizeFit = -1, -1
			w.Notes = append(w.Notes, "the reserved peak does not grow with the size here: no largest size can be predicted")
		} else {
			errR := max(w.Reserved.LOOError, 0)
			w.MaxSizeFit = largestFitting(func(x float64) float64 { return w.Reserved.At(x) }, budget)
			w.MaxSize = largestFitting(func(x float64) float64 { return w.Reserved.At(x) * (1 + errR) }, budget)
			if w.Reserved.LOOError < 0 {
				w.Notes = append(w.Notes, "the fit's error is unknown: the largest size has no margin for it")
			}
			if float64(w.MaxSize) > 4*last {
				w.Notes = append(w.Notes, fmt.Sprintf("the largest size is more than 4× the largest recorded (%v): record a size nearer to it to confirm", last))
			}
		}
	} else {
		w.Notes = append(w.Notes, "the device's memory is unknown (give it, e.g. --device-memory 80GiB): no largest size")
	}
	return w, nil
}

func (w *WhatIf) predict(x float64) Prediction {
	p := Prediction{Size: x, Allocated: int64(math.Round(w.Allocated.At(x))), Reserved: int64(math.Round(w.Reserved.At(x)))}
	if w.DeviceMemory > 0 {
		fits := p.Reserved+w.Overhead <= w.DeviceMemory
		p.Fits = &fits
	}
	return p
}

// largestFitting is the largest whole x ≥ 1 with f(x) ≤ budget, for f
// increasing from the recorded sizes on (0 when f(1) is over budget).
func largestFitting(f func(float64) float64, budget float64) int64 {
	if f(1) > budget {
		return 0
	}
	lo, hi := int64(1), int64(2)
	for f(float64(hi)) <= budget {
		lo, hi = hi, hi*2
		if hi > 1<<40 {
			return lo
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if f(float64(mid)) <= budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func fitCategories(pts []WhatIfPoint, xs []float64) []CategoryFit {
	names := map[string]bool{}
	for _, p := range pts {
		for n := range p.Categories {
			names[n] = true
		}
	}
	if len(names) == 0 {
		return nil
	}
	var out []CategoryFit
	for n := range names {
		ys := make([]float64, len(pts))
		for i, p := range pts {
			ys[i] = float64(p.Categories[n])
		}
		c, err := leastSquares(xs, ys, 1)
		if err != nil {
			continue
		}
		out = append(out, CategoryFit{Name: n, Fixed: c[0], PerUnit: c[1]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PerUnit != out[j].PerUnit {
			return out[i].PerUnit > out[j].PerUnit
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func fitWithError(xs, ys []float64, deg int) (Fit, error) {
	c, err := leastSquares(xs, ys, deg)
	if err != nil {
		return Fit{}, err
	}
	e := looErr(xs, ys, deg)
	return Fit{Coef: c, LOOError: e.max, LOOMean: e.mean}, nil
}

type loo struct{ max, mean float64 }

// looErr predicts each point from the others; -1 when the others cannot
// determine the polynomial.
func looErr(xs, ys []float64, deg int) loo {
	n := len(xs)
	if n-1 < deg+1 {
		return loo{-1, -1}
	}
	var worst, sum float64
	for i := range xs {
		rx := append(append([]float64(nil), xs[:i]...), xs[i+1:]...)
		ry := append(append([]float64(nil), ys[:i]...), ys[i+1:]...)
		c, err := leastSquares(rx, ry, deg)
		if err != nil {
			return loo{-1, -1}
		}
		e := math.Abs(Fit{Coef: c}.At(xs[i])-ys[i]) / ys[i]
		worst = max(worst, e)
		sum += e
	}
	return loo{worst, sum / float64(n)}
}

// leastSquares fits a polynomial of degree deg by the normal equations on
// x scaled to [0, 1] (sizes in the thousands squared stay well conditioned).
func leastSquares(xs, ys []float64, deg int) ([]float64, error) {
	k := deg + 1
	if len(xs) < k {
		return nil, fmt.Errorf("a degree-%d fit needs %d points, have %d", deg, k, len(xs))
	}
	scale := 0.0
	for _, x := range xs {
		scale = max(scale, math.Abs(x))
	}
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k+1)
	}
	for j, x := range xs {
		u := x / scale
		pw := make([]float64, 2*k)
		pw[0] = 1
		for i := 1; i < 2*k; i++ {
			pw[i] = pw[i-1] * u
		}
		for r := 0; r < k; r++ {
			for c := 0; c < k; c++ {
				a[r][c] += pw[r+c]
			}
			a[r][k] += pw[r] * ys[j]
		}
	}
	// Gaussian elimination with partial pivoting.
	for c := 0; c < k; c++ {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) < 1e-12 {
			return nil, errors.New("the sizes do not determine the fit (too few distinct sizes)")
		}
		a[c], a[p] = a[p], a[c]
		for r := 0; r < k; r++ {
			if r == c {
				continue
			}
			f := a[r][c] / a[c][c]
			for cc := c; cc <= k; cc++ {
				a[r][cc] -= f * a[c][cc]
			}
		}
	}
	coef := make([]float64, k)
	for i := 0; i < k; i++ {
		coef[i] = a[i][k] / a[i][i] / math.Pow(scale, float64(i))
	}
	return coef, nil
}
