package analyze

// report.go is the data of the linked report that every front end draws
// (profiler/flame/web/report.js): the parts of the analysis the page shows
// beside the flame graph, and the live set over time (moments.go).

import (
	"encoding/json"
	"fmt"
)

// reportKeys are the analysis fields the report shows. allocator_maps is
// drawn by allocmap.js when the analysis has it.
var reportKeys = []string{"file", "file_bytes", "events", "peak", "ooms", "findings", "steps",
	"step_source", "categories", "device_memory", "allocator_maps", "road"}

// ReportSites bounds the top lines a report carries.
const ReportSites = 50

// Report is the JSON object report.js draws beside a flame tree: the analysis
// fields of reportKeys, "sites" (the top ReportSites), "device" (the peak
// device without its allocator state) and "moments".
func (r *Result) Report() ([]byte, error) {
	full, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(full, &fields); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	out := map[string]any{}
	for _, k := range reportKeys {
		if v, ok := fields[k]; ok {
			out[k] = v
		}
	}
	out["sites"] = r.Sites[:min(len(r.Sites), ReportSites)]
	if d := r.peakDevice(); d != nil {
		out["device"] = map[string]any{"device": d.Device, "peak": d.Peak, "timeline": d.Timeline,
			"start_us": d.StartUS, "end_us": d.EndUS, "pre_trace_bytes": d.PreTraceBytes}
	}
	if m := r.Moments(); m != nil {
		out["moments"] = m
	}
	return json.Marshal(out)
}

// DiffReport is b's report with what the diff view adds: "before", a's peak
// device timeline, categories and file (the timeline draws it over b's), and
// "diff", the per-line Compare(a, b).
func DiffReport(a, b *Result) ([]byte, error) {
	rb, err := b.Report()
	if err != nil {
		return nil, err
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(rb, &out); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	before := map[string]any{"file": a.File, "peak": a.Peak, "categories": a.Categories, "ooms": a.OOMs, "steps": a.Steps}
	if d := a.peakDevice(); d != nil {
		before["device"] = map[string]any{"device": d.Device, "peak": d.Peak, "timeline": d.Timeline,
			"start_us": d.StartUS, "end_us": d.EndUS}
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
