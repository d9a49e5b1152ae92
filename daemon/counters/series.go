// series.go: what the Collector serves: a time range downsampled (Series,
// ProcessSeries) and the newest readings (Latest, Processes).

package counters

import (
	"sort"
)

func devTime(r *devRecord) int64    { return r.timeMS }
func devWeight(r *devRecord) uint64 { return r.used }
func procTime(r *procRecord) int64  { return r.timeMS }
func procWeight(r *procRecord) uint64 {
	return r.used
}

// Series returns device's samples with fromMS <= TimeMS <= toMS (toMS <= 0:
// up to now), oldest first. When more than maxPoints (> 0) match, the range is
// cut into maxPoints equal buckets, each represented by its sample with the
// most memory used (its time and memory), every other field raised to its
// maximum over the bucket's samples that have it.
func (c *Collector) Series(device int, fromMS, toMS int64, maxPoints int) []DeviceSample {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if device < 0 || device >= len(c.devs) || c.devs[device] == nil {
		return nil
	}
	r := c.devs[device]
	lo, hi := r.span(devTime, fromMS, toMS)
	n := hi - lo
	if maxPoints > 0 {
		n = min(n, maxPoints)
	}
	out := make([]DeviceSample, 0, n)
	uuid := c.uuids[device]
	pick(r, lo, hi, maxPoints, devWeight, (*devRecord).maxWith, func(rec *devRecord) {
		out = append(out, rec.sample(device, uuid))
	})
	return out
}

// ProcessSeries returns pid's samples on every GPU it used, with fromMS <=
// TimeMS <= toMS (toMS <= 0: up to now), ordered by time then GPU, each GPU
// downsampled to maxPoints (> 0) as Series does.
func (c *Collector) ProcessSeries(pid uint32, fromMS, toMS int64, maxPoints int) []ProcessSample {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []ProcessSample
	for k, h := range c.procs {
		if k.pid != pid {
			continue
		}
		lo, hi := h.ring.span(procTime, fromMS, toMS)
		pick(&h.ring, lo, hi, maxPoints, procWeight, (*procRecord).maxWith, func(r *procRecord) {
			out = append(out, ProcessSample{
				TimeMS: r.timeMS, Device: k.device, PID: pid, Valid: r.valid,
				UsedBytes: r.used, SMUtilPct: uint32(r.sm), MemUtilPct: uint32(r.mem),
			})
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TimeMS != out[j].TimeMS {
			return out[i].TimeMS < out[j].TimeMS
		}
		return out[i].Device < out[j].Device
	})
	return out
}

// Latest returns, for each GPU in the last tick, the newest value of every
// field: the last tick's sample, with the fields it lacks (the slow tier is
// read once a second) taken from the newest earlier sample that has them, no
// older than LatestMaxAge. TimeMS is the last tick's. The result is a copy.
func (c *Collector) Latest() []DeviceSample {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]DeviceSample, 0, len(c.curDevs))
	for _, d := range c.curDevs {
		st := &c.cur[d]
		s := st.s
		if s.Valid&FieldsGPM != 0 {
			g := st.g
			s.GPM = &g
		}
		out = append(out, s)
	}
	return out
}

// Processes returns the processes NVML listed on the last tick, with the
// device memory each holds; SM and memory utilisation (read every
// ProcUtilPeriod) come from the newest sample that has them, no older than
// LatestMaxAge. The result is a copy.
func (c *Collector) Processes() []ProcessSample {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := append([]ProcessSample(nil), c.current...)
	maxAge := LatestMaxAge.Milliseconds()
	for i := range out {
		p := &out[i]
		h := c.procs[procKey{p.PID, p.Device}]
		if h == nil || p.Valid&(ProcSMUtil|ProcMemUtil) != 0 || h.utilValid == 0 || p.TimeMS-h.utilMS > maxAge {
			continue
		}
		p.SMUtilPct, p.MemUtilPct = h.sm, h.mem
		p.Valid |= h.utilValid
	}
	return out
}
