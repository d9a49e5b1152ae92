package analyze

// report.go is the data of the linked report that every front end draws
// (profiler/flame/web/report.js): the parts of the analysis the page shows
// beside the flame graph, and the live set over time (moments.go).

import (
	"encoding/json"
	"fmt"
)

// ReportSites bounds the top lines a report carries.
const ReportSites = 50

// Report is the JSON object report.js draws beside a flame tree: the
// analysis fields the page shows, "sites" (the top ReportSites), "device"
// (the peak device without its allocator state) and "moments". Its fields
// are in the order of their JSON names, as the map it replaced wrote them.
type Report struct {
	AllocatorMaps []AllocatorMaps `json:"allocator_maps"` // drawn by allocmap.js when the analysis has them
	Categories    []Category      `json:"categories"`
	Device        *ReportDevice   `json:"device,omitempty"` // the device with the highest peak
	DeviceMemory  int64           `json:"device_memory,omitempty"`
	Events        int64           `json:"events"`
	File          string          `json:"file"`
	FileBytes     int64           `json:"file_bytes"`
	Findings      []Finding       `json:"findings"`
	Moments       *Moments        `json:"moments,omitempty"` // the live set over time (moments.go)
	OOMs          []OOM           `json:"ooms"`
	Peak          Peak            `json:"peak"`
	Road          *Road           `json:"road,omitempty"` // every step of the run, when the agent measured them (road.go)
	Sites         []Site          `json:"sites"`          // the top ReportSites lines
	StepSource    string          `json:"step_source"`
	Steps         []Step          `json:"steps"`
}

// ReportDevice is the peak device of a report, without its allocator state.
type ReportDevice struct {
	Device        int      `json:"device"`
	EndUS         int64    `json:"end_us"`
	Peak          Peak     `json:"peak"`
	PreTraceBytes int64    `json:"pre_trace_bytes"`
	StartUS       int64    `json:"start_us"`
	Timeline      Timeline `json:"timeline"`
}

// Report is the data of the linked report (ReportData's JSON).
func (r *Result) Report() ([]byte, error) {
	b, err := json.Marshal(r.ReportData())
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return b, nil
}

// ReportData is the linked report of r.
func (r *Result) ReportData() Report {
	rep := Report{AllocatorMaps: r.AllocatorMaps, Categories: r.Categories, DeviceMemory: r.DeviceMemory,
		Events: r.Events, File: r.File, FileBytes: r.Bytes, Findings: r.Findings, OOMs: r.OOMs, Peak: r.Peak,
		Sites: r.Sites[:min(len(r.Sites), ReportSites)], StepSource: r.StepSource, Steps: r.Steps, Moments: r.Moments(),
		Road: r.Road}
	if d := r.peakDevice(); d != nil {
		rep.Device = &ReportDevice{Device: d.Device, Peak: d.Peak, Timeline: d.Timeline,
			StartUS: d.StartUS, EndUS: d.EndUS, PreTraceBytes: d.PreTraceBytes}
	}
	return rep
}

// CompareReport is what DiffReport writes: b's report with "before", a's
// peak device timeline, categories and file (the timeline draws it over
// b's), and "diff", the per-line Compare(a, b).
type CompareReport struct {
	Report
	Before ReportBefore `json:"before"`
	Diff   Diff         `json:"diff"`
}

// ReportBefore is the snapshot before, in a CompareReport (its fields in the
// order of their JSON names).
type ReportBefore struct {
	Categories []Category    `json:"categories"`
	Device     *BeforeDevice `json:"device,omitempty"` // its device with the highest peak
	File       string        `json:"file"`
	OOMs       []OOM         `json:"ooms"`
	Peak       Peak          `json:"peak"`
	Steps      []Step        `json:"steps"`
}

// BeforeDevice is the peak device of the snapshot before.
type BeforeDevice struct {
	Device   int      `json:"device"`
	EndUS    int64    `json:"end_us"`
	Peak     Peak     `json:"peak"`
	StartUS  int64    `json:"start_us"`
	Timeline Timeline `json:"timeline"`
}

// DiffReport writes b's report with a beside it (CompareReport), its keys
// sorted as one JSON object.
func DiffReport(a, b *Result) ([]byte, error) {
	rb, err := b.Report()
	if err != nil {
		return nil, err
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(rb, &out); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	before := ReportBefore{File: a.File, Peak: a.Peak, Categories: a.Categories, OOMs: a.OOMs, Steps: a.Steps}
	if d := a.peakDevice(); d != nil {
		before.Device = &BeforeDevice{Device: d.Device, Peak: d.Peak, Timeline: d.Timeline, StartUS: d.StartUS, EndUS: d.EndUS}
	}
	for k, v := range map[string]any{"before": before, "diff": Compare(a, b)} {
		if out[k], err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
	}
	return json.Marshal(out)
}

func (r *Result) peakDevice() *Device {
	for i := range r.Devices {
		if r.Devices[i].Device == r.Peak.Device {
			return &r.Devices[i]
		}
	}
	return nil
}
