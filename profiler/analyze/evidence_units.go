package analyze

// EvidenceUnit is what an evidence number counts.
type EvidenceUnit string

// The units of evidence numbers.
const (
	UnitBytes   EvidenceUnit = "bytes"
	UnitCount   EvidenceUnit = "count"   // blocks, tensors, iterations, tokens, a batch
	UnitPercent EvidenceUnit = "percent" // whole percents
	UnitStep    EvidenceUnit = "step"    // a step's index
	UnitFlag    EvidenceUnit = "flag"    // 0 or 1
)

// evidenceUnits is every number a finding gives as evidence, by its key: the
// one place that says how it reads (TestEveryEvidenceNumberHasAUnit keeps it
// whole).
var evidenceUnits = map[string]EvidenceUnit{
	"activation_bytes":            UnitBytes,
	"allocated":                   UnitBytes,
	"allocated_activation":        UnitBytes,
	"allocated_gradient":          UnitBytes,
	"allocated_graph_pool":        UnitBytes,
	"allocated_kv_cache":          UnitBytes,
	"allocated_optimizer_state":   UnitBytes,
	"allocated_other":             UnitBytes,
	"allocated_parameter":         UnitBytes,
	"allocated_temporary":         UnitBytes,
	"allocated_unknown":           UnitBytes,
	"bytes":                       UnitBytes,
	"bytes_per_iteration":         UnitBytes,
	"bytes_per_step":              UnitBytes,
	"device_free":                 UnitBytes,
	"device_memory":               UnitBytes,
	"fit_limit":                   UnitBytes,
	"freed_after_peak":            UnitBytes,
	"growth_per_step":             UnitBytes,
	"kv_bytes_per_token":          UnitBytes,
	"kv_cache_bytes":              UnitBytes,
	"largest_free_block":          UnitBytes,
	"leaked_bytes":                UnitBytes,
	"live_bytes_at_from_step_end": UnitBytes,
	"live_bytes_at_to_step_end":   UnitBytes,
	"live_growth":                 UnitBytes,
	"named":                       UnitBytes,
	"peak":                        UnitBytes,
	"process_cap":                 UnitBytes,
	"process_cap_at_most":         UnitBytes,
	"projected_bytes":             UnitBytes,
	"requested":                   UnitBytes,
	"reserved":                    UnitBytes,
	"reserved_unallocated":        UnitBytes,
	"total":                       UnitBytes,
	"blocks":                      UnitCount,
	"fit_max_batch":               UnitCount,
	"fit_max_tokens":              UnitCount,
	"free_blocks":                 UnitCount,
	"iterations_alive_at_peak":    UnitCount,
	"iterations_run_by_peak":      UnitCount,
	"kv_batch":                    UnitCount,
	"kv_layers":                   UnitCount,
	"kv_tokens":                   UnitCount,
	"partly_used_segments":        UnitCount,
	"projection_steps":            UnitCount,
	"segments":                    UnitCount,
	"sizes":                       UnitCount,
	"steps":                       UnitCount,
	"steps_with_new_blocks":       UnitCount,
	"tensors":                     UnitCount,
	"peak_share_pct":              UnitPercent,
	"reserved_unallocated_pct":    UnitPercent,
	"share_pct":                   UnitPercent,
	"fills_device_at_step":        UnitStep,
	"first_new_step":              UnitStep,
	"from_step":                   UnitStep,
	"last_new_step":               UnitStep,
	"oom_step":                    UnitStep,
	"to_step":                     UnitStep,
	"expandable_segments":         UnitFlag,
	// The daemon's non_pytorch_memory finding (daemon/nonpytorch.go).
	"other_processes_bytes": UnitBytes,
	"nvml_process_bytes":    UnitBytes,
	"pytorch_reserved":      UnitBytes,
	"outside_pytorch":       UnitBytes,
	"context_estimate":      UnitBytes,
	"beyond_context":        UnitBytes,
	"device_total":          UnitBytes,
	"device_share_pct":      UnitPercent,
}

// EvidenceUnitOf is the unit of an evidence number; false for a key the
// table does not know (a front end then prints the plain number).
func EvidenceUnitOf(key string) (EvidenceUnit, bool) {
	u, ok := evidenceUnits[key]
	return u, ok
}
