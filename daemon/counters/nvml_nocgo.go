//go:build !cgo

package counters

// Open returns a Sampler that never samples: NVML is reached through cgo,
// which this build does not have.
func Open() (Sampler, Status) {
	st := Status{Reason: "built without cgo: NVML compiled out"}
	return Unavailable(st), st
}
