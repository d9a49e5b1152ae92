package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/vramscope/vramscope/"

// allowed lists, for each layer (a package path relative to the module, "/..."
// for a subtree), the module packages and external modules it may import.
// The standard library is always allowed. Order matters: the first match wins.
var allowed = []struct {
	pkg  string
	may  []string
	note string
}{
	{"profiler", nil, "the model: standard library only"},
	{"profiler/pickle", nil, "the safe pickle reader: standard library only"},
	{"profiler/marshal", []string{"profiler/pickle"}, "marshal and VSM1 streams -> pickle values, and VSM1 -> pickle"},
	{"profiler/torchsnap", []string{"profiler", "profiler/pickle", "profiler/marshal"}, "snapshot pickle or VSM1 stream -> the model"},
	{"profiler/flame", []string{"profiler"}, "one flame-graph core, no analysis"},
	{"profiler/flame/...", []string{"profiler", "profiler/flame"}, "the demo page's generator"},
	{"profiler/analyze", []string{"profiler", "profiler/pickle", "profiler/torchsnap", "profiler/flame", "profiler/forecast"}, "the engine: peak, sites, timeline, findings, diff"},
	{"profiler/gpuphase", nil, "counter recordings -> classified phases: standard library only"},
	{"profiler/forecast", nil, "per-step levels -> when the device is full: standard library only"},
	{"profiler/idle", nil, "stack samples joined with GPU utilisation -> idle causes by line: standard library only"},
	{"profiler/pprofenc", []string{"profiler", "profiler/analyze", "github.com/google/pprof/profile"}, "an analysis as a pprof profile"},
	{"daemon/store", nil, "the snapshot store: standard library only"},
	{"daemon/counters", []string{"daemon/api", "profiler/gpuphase", "github.com/NVIDIA/go-nvml/..."}, "NVML behind a small interface; its samples' wire form is daemon/api's"},
	{"daemon/api", []string{"profiler/analyze", "profiler/flame", "profiler/gpuphase", "profiler/idle"}, "the JSON-RPC contract: types and names, the engine's result types (the store's record is converted by the daemon)"},
	{"daemon/client", []string{"daemon/api", "github.com/sourcegraph/jsonrpc2"}, "the Go client of the API (CLI, LSP, tests)"},
	{"daemon/kube", nil, "a process's pod from its cgroup and the kubelet: standard library only"},
	{"daemon/metrics", []string{"daemon/counters", "profiler/gpuphase", "github.com/prometheus/client_golang/..."}, "the Prometheus collector over a State the daemon hands it"},
	{"daemon/transport", []string{"daemon/api", "daemon/store", "github.com/sourcegraph/jsonrpc2"}, "how a peer reaches the daemon: listeners, peer credentials, the token, TCP slots, the descriptor budget, the JSON-RPC stream"},
	{"daemon/export", []string{"daemon/metrics", "daemon/store", "profiler/analyze", "profiler/pprofenc", "github.com/prometheus/client_golang/..."}, "the HTTP exporter: Prometheus metrics and pprof profiles over Sources the daemon hands it"},
	{"daemon/capture", []string{"daemon/api", "daemon/store", "profiler/analyze"}, "the capture pipeline below the sessions: the streamed capture into the store, the agents' spool, the cache of analyses"},
	{"daemon", []string{"daemon/api", "daemon/transport", "daemon/capture", "daemon/export", "daemon/store", "daemon/counters", "daemon/client", "daemon/kube", "daemon/metrics", "internal/rpccancel", "profiler", "profiler/analyze", "profiler/flame", "profiler/gpuphase", "profiler/forecast", "profiler/idle", "github.com/sourcegraph/jsonrpc2"}, "the composition root: the Daemon, sessions and their handlers, agents, events; composes transport, capture, export"},
	{"lsp/command", []string{"daemon/api", "profiler/analyze", "profiler/flame"}, "the language server's commands and their types, declared once"},
	{"lsp", []string{"lsp/command", "daemon/api", "daemon/client", "internal/rpccancel", "profiler", "profiler/analyze", "profiler/flame", "github.com/sourcegraph/jsonrpc2", "go.lsp.dev/protocol", "go.lsp.dev/uri"}, "the language server: a daemon client, never the NVML sampler"},
	{"cmd/vramscope/cli", []string{"profiler/...", "cmd/vramscope/mcp", "daemon", "daemon/...", "lsp", "lsp/..."}, "subcommands call the engine, the daemon or the language server"},
	{"cmd/vramscope/mcp", []string{"daemon/api", "daemon/client", "profiler", "profiler/analyze", "github.com/modelcontextprotocol/go-sdk/..."}, "the MCP server: the engine for files, a daemon client for the rest, never the daemon itself"},
	{"internal/synth", []string{"profiler", "profiler/pickle", "profiler/torchsnap"}, "large snapshots made from real ones, for benchmarks and tests (cmd/vramscope-synth)"},
	{"internal/archtest", nil, "this test"},
	{"internal/rpccancel", []string{"github.com/sourcegraph/jsonrpc2"}, "the running requests of one JSON-RPC connection, for $/cancelRequest (daemon and language server)"},
	{"internal/docstest", nil, "the test that every path the docs and comments name exists"},
	{"internal/wiregen", []string{"daemon/api", "lsp/command", "profiler/analyze", "internal/golden"}, "generates docs/api.md, the Python and TypeScript wire files from daemon/api and lsp/command"},
	{"internal/wiregen/cmd/wiregen", []string{"internal/wiregen"}, "go generate's entry point"},
	{"internal/golden", nil, "golden-file checks for tests: standard library only"},
	{"internal/reftool", nil, "reference tests skip where their tool is missing, fail in CI: standard library only"},
	{"internal/daemontest", []string{"daemon", "daemon/api", "profiler/forecast", "github.com/sourcegraph/jsonrpc2"}, "a real daemon and fake agents for the tests of the CLI and the language server"},
	{"internal/vsmtest", nil, "real snapshots as VSM1 (by the agent's writer) for tests: standard library only"},
	{"internal/hostile", []string{"profiler/pickle"}, "the snapshots that broke vramscope (deep stacks), generated for tests"},
	{"cmd/vramscope", []string{"cmd/vramscope/cli"}, "a thin entry point"},
	{"cmd/vramscope-synth", []string{"internal/synth"}, "a thin entry point"},
	{"bench", nil, "runs the built binaries; imports nothing of ours"},
	{"deploy/kubernetes", nil, "manifests; only its test imports (the Kubernetes API types, to validate them)"},
	{"deploy/prometheus", nil, "an example alert rule; only its test runs (promtool check rules, test rules)"},
	{"bench/lspbench", nil, "drives the built binary's language server; imports nothing of ours"},
}

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func matches(pattern, path string) bool {
	if strings.HasSuffix(pattern, "/...") {
		base := strings.TrimSuffix(pattern, "/...")
		return strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// listPackages lists every package of the module with its imports.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 8 {
		t.Fatalf("only %d packages listed; is go list looking at the module?", len(pkgs))
	}
	return pkgs
}

func codeGraph(pkgs []pkg) graph {
	g := graph{}
	for _, p := range pkgs {
		g[strings.TrimPrefix(p.ImportPath, module)] = ours(p.Imports)
	}
	return g
}

// TestImportLayers fails on any import the table does not allow.
func TestImportLayers(t *testing.T) {
	pkgs := listPackages(t)
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestViolationsCatchForbiddenEdge makes sure the checker itself can fail.
func TestViolationsCatchForbiddenEdge(t *testing.T) {
	bad := []pkg{
		{ImportPath: module + "profiler", Imports: []string{"fmt", module + "profiler/analyze"}},
		{ImportPath: module + "profiler/pickle", Imports: []string{"github.com/nlpodyssey/gopickle/pickle"}},
		{ImportPath: module + "profiler/torchsnap", Imports: []string{module + "profiler/pickle"}},
		{ImportPath: module + "somewhere/new", Imports: nil},
	}
	if v := violations(bad); len(v) != 3 {
		t.Fatalf("want 3 violations (model importing analysis, pickle importing gopickle, unknown package), got %d: %v", len(v), v)
	}
}

func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module)
		rule := -1
		for i, r := range allowed {
			if matches(r.pkg, rel) {
				rule = i
				break
			}
		}
		if rule < 0 {
			out = append(out, rel+" is not in the layer table of internal/archtest (and docs/architecture.md): add it")
			continue
		}
		for _, imp := range p.Imports {
			if isStd(imp) {
				continue
			}
			ok := false
			for _, m := range allowed[rule].may {
				target := imp
				if strings.HasPrefix(imp, module) {
					target = strings.TrimPrefix(imp, module)
				}
				if matches(m, target) || (strings.HasSuffix(m, "/...") && target == strings.TrimSuffix(m, "/...")) {
					ok = true
				}
			}
			if !ok {
				out = append(out, "forbidden import: "+rel+" imports "+imp)
			}
		}
	}
	return out
}

// TestLSPNeverReachesNVML: not even indirectly does the language server link
// the NVML sampler (or go-nvml and its cgo).
func TestLSPNeverReachesNVML(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../lsp").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps gave %d packages", len(deps))
	}
	for _, d := range deps {
		if d == module+"daemon/counters" || strings.HasPrefix(d, "github.com/NVIDIA/go-nvml") {
			t.Errorf("lsp depends on %s", d)
		}
	}
}

// TestDaemonRootOnTop: the daemon package composes its parts (daemon/transport,
// daemon/capture, daemon/export, …); none of them imports it, in code or in
// tests, so a part never reaches back into the Daemon's state.
func TestDaemonRootOnTop(t *testing.T) {
	for _, v := range rootImporters(listPackages(t)) {
		t.Error(v)
	}
	bad := []pkg{{ImportPath: module + "daemon/capture", TestImports: []string{module + "daemon"}}}
	if v := rootImporters(bad); len(v) != 1 {
		t.Fatalf("a part's test importing the daemon: want 1 violation, got %v", v)
	}
}

// rootImporters lists the imports of the daemon package from its parts.
func rootImporters(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module)
		if !strings.HasPrefix(rel, "daemon/") {
			continue
		}
		for _, imp := range append(append(append([]string{}, p.Imports...), p.TestImports...), p.XTestImports...) {
			if imp == module+"daemon" {
				out = append(out, rel+" imports the daemon package, which composes it: pass what it needs in (a struct of funcs, a small interface)")
			}
		}
	}
	return out
}
