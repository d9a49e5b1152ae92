package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// cancelSection runs BenchmarkCancelMidDecode (profiler/analyze) on the
// 5M-entry snapshot: how long an analysis takes to return once its request is
// cancelled, in each of the decoder's two passes. Goal: ≤ 100 ms.
func cancelSection(log func(string, ...any), snapshot string) string {
	abs, err := filepath.Abs(snapshot)
	if err != nil {
		return ""
	}
	when := time.Now().UTC().Format("2006-01-02 15:04 MST")
	cmd := exec.Command("go", "test", "./profiler/analyze", "-run", "XXX", "-bench", "CancelMidDecode", "-benchtime", "5x")
	cmd.Env = append(os.Environ(), "VRAMSCOPE_SNAPSHOT_5M="+abs)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log("bench: the cancellation benchmark failed: %v\n%s", err, out)
		return ""
	}
	re := regexp.MustCompile(`BenchmarkCancelMidDecode/(\w+)-\d+\s+(\d+)\s+\d+ ns/op\s+([\d.]+) ms-worst\s+([\d.]+) ms/cancel`)
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Cancellation: an analysis of gpt2_long_5000k stops once its request is cancelled\n\n")
	fmt.Fprintf(&b, "Run on %s (this machine): `go test ./profiler/analyze -bench CancelMidDecode -benchtime 5x` cancels "+
		"`analyze.RunContext` at 30%% of the planning pass and at 40%% of the decoding pass and times cancel() to return. Goal: ≤ 100 ms.\n\n", when)
	fmt.Fprintf(&b, "| cancelled in | runs | mean | worst | ≤ 100 ms |\n|---|---:|---:|---:|---:|\n")
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		var worst float64
		fmt.Sscan(m[3], &worst)
		fmt.Fprintf(&b, "| %s pass | %s | %s ms | %s ms | %s |\n", m[1], m[2], m[4], m[3], mark(worst <= 100))
	}
	return b.String()
}
