package metrics

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vramscope/vramscope/daemon/counters"
)

func state() State {
	full := counters.DeviceSample{Device: 0, UUID: "GPU-0", Valid: counters.FieldMemUsed | counters.FieldMemTotal | counters.FieldUtilGPU |
		counters.FieldUtilMem | counters.FieldPCIeRx | counters.FieldPCIeTx | counters.FieldPower,
		MemUsedBytes: 1 << 30, MemTotalBytes: 80 << 30, UtilGPUPct: 50, UtilMemPct: 25, PCIeRxKBps: 1000, PCIeTxKBps: 2, PowerMW: 300500}
	bare := counters.DeviceSample{Device: 1, UUID: "GPU-1", Valid: counters.FieldMemUsed, MemUsedBytes: 2 << 30}
	return State{CountersAvailable: true, Agents: 1, StoredSnapshots: 3, OOMs: 2,
		GPUs: []GPU{{Sample: full, Phase: "compute_bound"}, {Sample: bare}},
		Processes: []Process{{PID: 7, Rank: 1, WorldSize: 0, Device: 0, Recording: true, Allocated: 10, Reserved: 20, Peak: 30,
			Pod: "p", Namespace: "ns", Container: "c", PodUID: "u"}},
		Snapshots: map[string]uint64{"oom": 2, "request": 1}, Findings: map[string]uint64{"leak": 1}}
}

func TestCollect(t *testing.T) {
	c := NewCollector(state)
	want := `
# HELP vramscope_gpu_power_watts Power drawn by the GPU (NVML).
# TYPE vramscope_gpu_power_watts gauge
vramscope_gpu_power_watts{gpu="0",uuid="GPU-0"} 300.5
# HELP vramscope_gpu_pcie_receive_bytes_per_second PCIe throughput from the host to the GPU (NVML).
# TYPE vramscope_gpu_pcie_receive_bytes_per_second gauge
vramscope_gpu_pcie_receive_bytes_per_second{gpu="0",uuid="GPU-0"} 1.024e+06
# HELP vramscope_gpu_utilization_ratio Share of the last sample period in which a kernel ran on the GPU, 0-1 (NVML).
# TYPE vramscope_gpu_utilization_ratio gauge
vramscope_gpu_utilization_ratio{gpu="0",uuid="GPU-0"} 0.5
# HELP vramscope_process_world_size torch.distributed world size of the process (1 when not distributed).
# TYPE vramscope_process_world_size gauge
vramscope_process_world_size{container="c",device="0",namespace="ns",pid="7",pod="p",pod_uid="u",rank="1"} 1
# HELP vramscope_snapshots_stored_total Snapshots stored since the daemon started, by reason (request, oom, import, agent, warning, other).
# TYPE vramscope_snapshots_stored_total counter
vramscope_snapshots_stored_total{reason="oom"} 2
vramscope_snapshots_stored_total{reason="request"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vramscope_gpu_power_watts", "vramscope_gpu_pcie_receive_bytes_per_second",
		"vramscope_gpu_utilization_ratio", "vramscope_process_world_size", "vramscope_snapshots_stored_total"); err != nil {
		t.Error(err)
	}
	// GPU 1 has memory only: no other series (no data is not 0), no phase.
	if n := testutil.CollectAndCount(c, "vramscope_gpu_power_watts", "vramscope_gpu_utilization_ratio"); n != 2 {
		t.Errorf("%d power/utilisation series, want GPU 0's two", n)
	}
	if n := testutil.CollectAndCount(c, "vramscope_gpu_phase"); n != len(Phases) {
		t.Errorf("%d phase series, want one per class for GPU 0", n)
	}
	if n := testutil.CollectAndCount(c, "vramscope_process_gpu_memory_used_bytes"); n != 0 {
		t.Errorf("NVML memory of a process NVML did not report: %d series", n)
	}
}

// TestLint runs client_golang's promlint (base units, _total on counters,
// names) over every metric.
func TestLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(NewCollector(state))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

var descRE = regexp.MustCompile(`fqName: "([^"]+)",.* variableLabels: \{([^}]*)\}`)

// TestDocListsEveryMetric: docs/metrics.md has a row per metric with its
// labels, and no row for a metric that does not exist.
func TestDocListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if m := regexp.MustCompile("^\\| `(vramscope_[a-z_]+)` \\| (\\w+) \\| ([^|]*) \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = m[3]
		}
	}
	for _, d := range Descs() {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		labels := strings.Split(m[2], ",")
		sort.Strings(labels)
		got, ok := rows[m[1]]
		if !ok {
			t.Errorf("docs/metrics.md has no row for %s", m[1])
			continue
		}
		delete(rows, m[1])
		var docLabels []string
		for _, l := range strings.Split(got, ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				docLabels = append(docLabels, l)
			}
		}
		sort.Strings(docLabels)
		if strings.Join(docLabels, ",") != strings.Trim(strings.Join(labels, ","), ",") {
			t.Errorf("%s: the doc says labels %v, the code %v", m[1], docLabels, labels)
		}
	}
	for name := range rows {
		t.Errorf("docs/metrics.md lists %s, which the daemon does not export", name)
	}
}

// TestOOMETA: the gauge is there for a process whose memory grows and
// absent for one whose memory does not (no data is not 0 seconds).
func TestOOMETA(t *testing.T) {
	c := NewCollector(func() State {
		return State{Processes: []Process{
			{PID: 7, Rank: 0, WorldSize: 1, OOMETA: 312.5, HasOOMETA: true},
			{PID: 8, Rank: 1, WorldSize: 1},
		}}
	})
	want := `
# HELP vramscope_process_oom_eta_seconds Seconds until the process's step peaks are projected to reach the memory it may use (its device, or its memory-fraction cap); present only while they grow in a sustained way.
# TYPE vramscope_process_oom_eta_seconds gauge
vramscope_process_oom_eta_seconds{container="",device="0",namespace="",pid="7",pod="",pod_uid="",rank="0"} 312.5
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "vramscope_process_oom_eta_seconds"); err != nil {
		t.Error(err)
	}
}
