//go:build cgo

package daemon

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/vramscope/vramscope/daemon/counters"
	"github.com/vramscope/vramscope/internal/reftool"
)

// simulatedH200 is go-nvml's simulated 8-GPU H200 machine with the readings
// the sampler asks for: GPU i uses i+1 GiB, is 10·i % busy and 3·i % on its
// memory controller, draws 300+i W and moves 1000·i KiB/s over PCIe; pid
// 4101 holds 6 GiB on GPU 0.
func simulatedH200(t *testing.T) counters.Sampler {
	srv := dgxh200.New()
	for i := range srv.Devices {
		d := srv.Devices[i].(*server.Device)
		d.MemoryInfo.Used = uint64(i+1) << 30
		d.MemoryInfo.Free = d.MemoryInfo.Total - d.MemoryInfo.Used
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: uint32(3 * i)}, nvml.SUCCESS
		}
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(300_000 + 1_000*i), nvml.SUCCESS }
		d.GetPcieThroughputFunc = func(nvml.PcieUtilCounter) (uint32, nvml.Return) { return uint32(1000 * i), nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if i == 0 {
				return []nvml.ProcessInfo{{Pid: 4101, UsedGpuMemory: 6 << 30}}, nvml.SUCCESS
			}
			return nil, nvml.SUCCESS
		}
	}
	smp, st := counters.NewNVML(srv)
	if !st.Available {
		t.Fatalf("simulated H200: %+v", st)
	}
	return smp
}

// fakeKubelet serves the kubelet's pod list of daemon/kube's fixture over
// TLS on loopback; it names the pod of testPods.
func fakeKubelet(t *testing.T) Kube {
	body, err := os.ReadFile("kube/testdata/kubelet_pods.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	return Kube{KubeletURL: srv.URL + "/pods", CAFile: ca}
}

// prometheusBinary is Debian's prometheus (make setup installs it). Outside
// CI a machine without it skips the test; in CI its absence fails it.
func prometheusBinary(t *testing.T) string {
	p, err := exec.LookPath("prometheus")
	if err == nil {
		return p
	}
	reftool.Missing(t, "the prometheus binary is not on PATH (apt-get install prometheus, or make setup): the real-scrape test is skipped")
	return ""
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPrometheus runs prometheus scraping target every 250 ms until the
// test ends, and returns its API's base URL once it is ready.
func startPrometheus(t *testing.T, target string) string {
	bin := prometheusBinary(t)
	dir := t.TempDir()
	conf := fmt.Sprintf("global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\nscrape_configs:\n  - job_name: vramscope\n    static_configs:\n      - targets: [%q]\n", target)
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o600)
	web := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a bound on the whole test
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, "--log.level=warn")
	log, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	base := "http://" + web
	waitFor(t, 60*time.Second, "prometheus ready", func() (bool, string) {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	return base
}

// promSeries is one series of an instant query's answer.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSeries) value() string { v, _ := s.Value[1].(string); return v }

// query runs PromQL through prometheus's HTTP API.
func query(t *testing.T, base, q string) []promSeries {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSeries `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, r.Error)
	}
	sort.Slice(r.Data.Result, func(i, j int) bool { return fmt.Sprint(r.Data.Result[i].Metric) < fmt.Sprint(r.Data.Result[j].Metric) })
	return r.Data.Result
}

// waitQuery polls a query until check accepts its answer (bounded).
func waitQuery(t *testing.T, base, q string, check func([]promSeries) bool) []promSeries {
	t.Helper()
	var got []promSeries
	waitFor(t, 30*time.Second, q, func() (bool, string) {
		got = query(t, base, q)
		return check(got), fmt.Sprint(got)
	})
	return got
}

// TestPrometheusScrapesDaemon: Debian's prometheus scrapes a running daemon
// (a simulated H200 behind NVML, two fake agents in one pod, one outside
// any pod); PromQL answers with the series and labels docs/metrics.md
// promises, and an agent's series are gone once it leaves.
func TestPrometheusScrapesDaemon(t *testing.T) {
	kl := fakeKubelet(t)
	d, cfg := testDaemon(t, withExport, withPods, func(c *Config) {
		c.Sampler = simulatedH200(t)
		c.Kube.KubeletURL, c.Kube.CAFile = kl.KubeletURL, kl.CAFile
	})
	r0 := fakeAgent(t, cfg.Socket, 4101, nil)
	r1 := fakeAgent(t, cfg.Socket, 4102, nil)
	fakeAgent(t, cfg.Socket, 4200, nil)
	torch(t, r0, 3<<30, 4<<30, 5<<30)
	torch(t, r1, 1<<30, 2<<30, 2<<30)
	call(t, dial(t, cfg.Socket), "snapshot.take", map[string]any{"pid": 4101, "analyze": true}, nil)
	prom := startPrometheus(t, d.ExportAddr())
	d.ObserveLevels(4102, leakLevels(1100), 3<<30) // rank 1 leaks: its OOM ETA, a warning and its snapshot

	gpus := waitQuery(t, prom, "vramscope_gpu_memory_used_bytes", func(s []promSeries) bool { return len(s) == 8 })
	if m := gpus[0].Metric; m["gpu"] != "0" || !strings.HasPrefix(m["uuid"], "GPU-") || m["job"] != "vramscope" || gpus[0].value() != "1073741824" {
		t.Errorf("GPU 0 memory: %v = %s", m, gpus[0].value())
	}
	for q, want := range map[string]string{
		`vramscope_gpu_utilization_ratio{gpu="7"}`:                          "0.7",
		`vramscope_gpu_memory_controller_utilization_ratio{gpu="7"}`:        "0.21",
		`vramscope_gpu_power_watts{gpu="3"}`:                                "303",
		`vramscope_gpu_memory_total_bytes{gpu="0"}`:                         fmt.Sprint(uint64(141) << 30), // the simulated H200's 141 GiB
		`vramscope_process_gpu_memory_used_bytes{pid="4101"}`:               fmt.Sprint(6 << 30),
		`sum(vramscope_process_torch_allocated_bytes{namespace="ml-team"})`: fmt.Sprint(4 << 30),
		`vramscope_snapshots_stored_total{reason="request"}`:                "1",
		`vramscope_counters_available`:                                      "1",
	} {
		s := waitQuery(t, prom, q, func(s []promSeries) bool { return len(s) == 1 })
		if s[0].value() != want {
			t.Errorf("%s = %s, want %s", q, s[0].value(), want)
		}
	}
	// Only the leaking rank has an OOM ETA, under the daemon's 10-minute warning.
	eta := waitQuery(t, prom, "vramscope_process_oom_eta_seconds", func(s []promSeries) bool { return len(s) == 1 })
	if v, err := strconv.ParseFloat(eta[0].value(), 64); eta[0].Metric["pid"] != "4102" || err != nil || v > nearSeconds {
		t.Errorf("OOM ETA: %v = %s", eta[0].Metric, eta[0].value())
	}
	waitQuery(t, prom, `vramscope_snapshots_stored_total{reason="warning"} == 1`, func(s []promSeries) bool { return len(s) == 1 })
	// What the GPUs did over the last seconds: GPU 7 (70% busy) computes,
	// GPU 0 (1 GiB, idle) idles.
	waitQuery(t, prom, `vramscope_gpu_phase{gpu=~"0|7"} == 1`, func(s []promSeries) bool {
		return len(s) == 2 && s[0].Metric["phase"] == "idle" && s[1].Metric["phase"] == "compute_bound"
	})

	procs := waitQuery(t, prom, "vramscope_process_torch_reserved_bytes", func(s []promSeries) bool {
		return len(s) == 3 && s[0].Metric["pod"] != "" // the kubelet's names have arrived
	})
	want := map[string]string{"pod": "llama-finetune-worker-3", "namespace": "ml-team", "container": "trainer",
		"pod_uid": testPods[4101].PodUID, "pid": "4101", "rank": "0", "device": "0"}
	for k, v := range want {
		if procs[0].Metric[k] != v {
			t.Errorf("rank 0's %s = %q, want %q (%v)", k, procs[0].Metric[k], v, procs[0].Metric)
		}
	}
	if m := procs[2].Metric; m["pid"] != "4200" || m["pod"] != "" || m["pod_uid"] != "" {
		t.Errorf("the process outside any pod: %v", m)
	}
	for _, s := range query(t, prom, `{__name__=~"vramscope_.+"}`) {
		for k, v := range s.Metric {
			if strings.ContainsAny(v, "/") || strings.Contains(v, "train.py") {
				t.Errorf("label %s=%q of %s carries a path or a command line", k, v, s.Metric["__name__"])
			}
		}
	}

	r0.Close() // rank 0 leaves: its series go stale at the next scrape
	waitQuery(t, prom, `vramscope_process_torch_allocated_bytes{pod="llama-finetune-worker-3"}`, func(s []promSeries) bool {
		return len(s) == 1 && s[0].Metric["pid"] == "4102"
	})
	if s := query(t, prom, `{pid="4101"}`); len(s) != 0 {
		t.Errorf("pid 4101's series after it left: %v", s)
	}
	if s := query(t, prom, `vramscope_agents`); len(s) != 1 || s[0].value() != "2" {
		t.Errorf("vramscope_agents after one left: %v", s)
	}
}
