package archtest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// floors are the layers, bottom first, as the folders draw them. A package
// may import packages of its own floor or of lower ones, never of a higher
// one: its code, and its tests too. Within a floor the table in
// imports_test.go says which edges are allowed (the language server is a
// client of the daemon, not its caller).
//
// internal/ belongs to no floor of its own: a package there sits on the floor
// of the highest package it imports. Those that import nothing of ours are the
// low helpers (floor 0: internal/rpccancel for the daemon and the language
// server, internal/golden and the like for tests); the others are test support
// and tools (internal/hostile and internal/synth over the engine,
// internal/daemontest and internal/wiregen over the servers), which only tests
// and entry points may import.
var floors = []struct {
	name    string
	folders []string
	about   string
}{
	{"helpers", nil, "internal/ packages that import nothing of ours"},
	{"engine", []string{"profiler", "profiler/..."}, "the model of a snapshot and its analysis; standard library and pprof only"},
	{"servers", []string{"daemon", "daemon/...", "lsp", "lsp/..."}, "the daemon and its parts, the language server; the wire contracts"},
	{"front ends", []string{"cmd/vramscope/..."}, "the subcommands (cmd/vramscope/cli) and the MCP server (cmd/vramscope/mcp)"},
	{"entry points", []string{"cmd/...", "bench", "bench/...", "deploy/..."}, "main packages and what only runs the built binary"},
}

// folderFloor is the floor a package's folder names, or -1 under internal/
// (or nowhere): the longest matching folder pattern wins.
func folderFloor(rel string) int {
	best, bestLen := -1, -1
	for i, f := range floors {
		for _, pat := range f.folders {
			if matches(pat, rel) && len(pat) > bestLen {
				best, bestLen = i, len(pat)
			}
		}
	}
	return best
}

type graph map[string][]string // package (relative to the module) -> the module packages its code imports

func ours(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if strings.HasPrefix(imp, module) {
			out = append(out, strings.TrimPrefix(imp, module))
		}
	}
	return out
}

// floorsOf gives every package its floor: by folder, or under internal/ the
// highest floor among the packages its code imports (0 for none).
func floorsOf(code graph) map[string]int {
	floor := map[string]int{}
	var of func(p string, seen map[string]bool) int
	of = func(p string, seen map[string]bool) int {
		if f, ok := floor[p]; ok {
			return f
		}
		if f := folderFloor(p); f >= 0 {
			floor[p] = f
			return f
		}
		if seen[p] {
			return 0 // an import cycle: go build refuses it before this matters
		}
		seen[p] = true
		f := 0
		for _, imp := range code[p] {
			f = max(f, of(imp, seen))
		}
		floor[p] = f
		return f
	}
	for p := range code {
		of(p, map[string]bool{})
	}
	return floor
}

// upEdges lists every import, in code or in tests, that runs up a floor, and
// every import of test support (internal/ above floor 0) from code below the
// entry points.
func upEdges(pkgs []pkg) []string {
	floor := floorsOf(codeGraph(pkgs))
	top := len(floors) - 1
	var out []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module)
		check := func(imports []string, where string) {
			for _, imp := range ours(imports) {
				fi, ok := floor[imp]
				if !ok {
					continue // a package go list did not list (a test-only main): nothing to rank
				}
				switch {
				case fi > floor[rel]:
					out = append(out, fmt.Sprintf("%s (floor %d, %s) imports %s (floor %d, %s) in its %s: an edge running up",
						rel, floor[rel], floors[floor[rel]].name, imp, fi, floors[fi].name, where))
				case where == "code" && fi > 0 && strings.HasPrefix(imp, "internal/") && !strings.HasPrefix(rel, "internal/") && floor[rel] != top:
					out = append(out, fmt.Sprintf("%s imports %s, test support (floor %d): only tests and entry points may", rel, imp, fi))
				}
			}
		}
		check(p.Imports, "code")
		check(append(append([]string{}, p.TestImports...), p.XTestImports...), "tests")
	}
	sort.Strings(out)
	return out
}

// TestLayersRunDown fails on an import that runs up a floor.
func TestLayersRunDown(t *testing.T) {
	pkgs := listPackages(t)
	for _, v := range upEdges(pkgs) {
		t.Error(v)
	}
	floor := floorsOf(codeGraph(pkgs))
	for _, want := range []struct {
		pkg   string
		floor int
	}{{"internal/rpccancel", 0}, {"profiler/pickle", 1}, {"internal/hostile", 1}, {"lsp", 2}, {"internal/daemontest", 2}, {"cmd/vramscope/cli", 3}, {"cmd/vramscope", 4}} {
		if got, ok := floor[want.pkg]; !ok || got != want.floor {
			t.Errorf("%s is on floor %d (listed: %v), want %d", want.pkg, got, ok, want.floor)
		}
	}
}

// TestUpEdgesCatchTheseEdges makes sure the floor check itself can fail.
func TestUpEdgesCatchTheseEdges(t *testing.T) {
	bad := []pkg{
		{ImportPath: module + "profiler"},
		{ImportPath: module + "daemon", Imports: []string{module + "profiler", module + "cmd/vramscope/cli", module + "internal/daemontest"}},
		{ImportPath: module + "lsp", TestImports: []string{module + "cmd/vramscope/mcp"}},
		{ImportPath: module + "internal/daemontest", Imports: []string{module + "daemon"}},
		{ImportPath: module + "profiler/analyze", XTestImports: []string{module + "internal/daemontest", module + "profiler"}},
		{ImportPath: module + "cmd/vramscope/cli", Imports: []string{module + "daemon", module + "profiler"}},
		{ImportPath: module + "cmd/vramscope/mcp"},
	}
	v := upEdges(bad)
	want := []string{
		"daemon (floor 2, servers) imports cmd/vramscope/cli (floor 3, front ends) in its code",
		"daemon imports internal/daemontest, test support",
		"lsp (floor 2, servers) imports cmd/vramscope/mcp (floor 3, front ends) in its tests",
		"profiler/analyze (floor 1, engine) imports internal/daemontest (floor 2, servers) in its tests",
	}
	if len(v) != len(want) {
		t.Fatalf("want %d edges caught, got %d: %q", len(want), len(v), v)
	}
	for _, w := range want {
		found := false
		for _, e := range v {
			found = found || strings.Contains(e, w)
		}
		if !found {
			t.Errorf("no edge caught like %q in %q", w, v)
		}
	}
}
