// sampler.go: the Sampler interface the Collector runs, and the stand-in for
// a machine without NVML.

package counters

import (
	"time"
)

// Status says whether counters can be read, and how sampling goes.
type Status struct {
	Available         bool   `json:"available"`
	Reason            string `json:"reason,omitempty"` // why not, when !Available
	DriverVersion     string `json:"driver_version,omitempty"`
	NVMLVersion       string `json:"nvml_version,omitempty"`
	CUDADriverVersion int    `json:"cuda_driver_version,omitempty"` // 12040 for 12.4
	DeviceCount       int    `json:"device_count"`
	IntervalMS        int64  `json:"interval_ms,omitempty"`
	Samples           uint64 `json:"samples"` // ticks sampled
	Errors            uint64 `json:"errors"`  // ticks whose Sample failed, returned an error or panicked
	LastError         string `json:"last_error,omitempty"`
	LostDevices       []int  `json:"lost_devices,omitempty"` // GPU_IS_LOST and the like: no longer sampled
	// DroppedProcessSamples counts process samples not kept because
	// MaxProcesses (process, GPU) pairs were all still running.
	DroppedProcessSamples uint64 `json:"dropped_process_samples,omitempty"`
}

// Sampler reads the counters of every GPU once per call. Implementations need
// not be safe for concurrent use: the Collector calls them from one goroutine.
type Sampler interface {
	// Devices lists the GPUs, read once when the sampler was opened.
	Devices() []DeviceInfo
	// Sample reads every GPU. The slices, and the GPMSamples they point to,
	// are the sampler's own and are reused by the next call. Samples returned together with an error are good (a
	// GPU was lost while the others still answer); a metric a GPU does not
	// report is no data in its sample, not an error.
	Sample(now time.Time) ([]DeviceSample, []ProcessSample, error)
	// Status reports availability, versions and the device count.
	Status() Status
	// Close releases the library; the sampler returns nothing afterwards.
	Close()
}

// Unavailable returns a Sampler with no devices that reports st (with
// Available forced false) and never samples: what Open returns without a
// driver, or without cgo.
func Unavailable(st Status) Sampler {
	st.Available = false
	return unavailable{st}
}

type unavailable struct{ st Status }

func (u unavailable) Devices() []DeviceInfo { return nil }
func (u unavailable) Sample(time.Time) ([]DeviceSample, []ProcessSample, error) {
	return nil, nil, nil
}
func (u unavailable) Status() Status { return u.st }
func (u unavailable) Close()         {}
