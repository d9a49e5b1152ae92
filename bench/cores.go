package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// coreCounts are the GOMAXPROCS settings the core-count table runs: this
// machine's 2, and the 16 and 32 of GPU hosts. The planning pass cuts the file
// into one part per core, so its memory once grew with the core count (0.76×
// the 5M-entry file on a 16-core H200 host); the table shows it no longer does.
var coreCounts = []int{2, 16, 32}

// coreSection runs vramscope analyze on the snapshot at each core count, the
// settings taking turns run by run, and writes the table beside python3's
// pickle.load of the same file from this run.
func coreSection(log func(string, ...any), name, path string, size int64, python figure) (string, error) {
	samples := make([][]sample, len(coreCounts))
	for i := 0; i < *runs; i++ {
		for k, p := range coreCounts {
			s, err := runOnceEnv(log, fmt.Sprintf("vramscope analyze %s GOMAXPROCS=%d", name, p), i, *runs,
				[]string{fmt.Sprintf("GOMAXPROCS=%d", p)}, filepath.Join("bin", "vramscope"), "analyze", "--json", path)
			if err != nil {
				return "", err
			}
			samples[k] = append(samples[k], s)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Core count: `vramscope analyze --json %s` at GOMAXPROCS %s\n\n", name, joinInts(coreCounts))
	fmt.Fprintf(&b, "This machine has fewer cores than most of these settings: the figures show memory per setting (the planning pass "+
		"runs one part per GOMAXPROCS), not the speed of a larger host. Goal: RSS/file size ≤ 0.25 whatever the core count. "+
		"python3 pickle.load of the same file in this run: %s (%s).\n\n", python, python.runs())
	b.WriteString(coresBefore)
	fmt.Fprintf(&b, "| GOMAXPROCS | vramscope analyze | analyze time / python time | analyze RSS / file size |\n|---:|---:|---:|---:|\n")
	for k, p := range coreCounts {
		f := summarize(samples[k])
		tr, rr := f.wall.Seconds()/python.wall.Seconds(), float64(f.rss)/float64(size)
		fmt.Fprintf(&b, "| %d | %s (%s) | %.3f %s | %.3f %s |\n", p, f, f.runs(), tr, mark(tr <= 0.25), rr, mark(rr <= 0.25))
	}
	return b.String(), nil
}

// coresBefore is what the same runs gave before the planning pass shared its
// read counters (one table per part), for comparison; it is not re-measured.
const coresBefore = "Before commit 59f65ab (one read-count table per part of the planning pass), on this VM on 2026-12-01 at 20:15 UTC, " +
	"one run each under `/usr/bin/time -v`: GOMAXPROCS 2: 1.00 s, 76.3 MiB (0.18×); 16: 1.04 s, 314 MiB (0.74×); 32: 1.11 s, 513 MiB (1.22×). " +
	"The H200 host (16 cores) measured 320 MiB (0.76×) with the same code.\n\n"

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// runOnceEnv is runOnce with extra environment variables.
func runOnceEnv(log func(string, ...any), what string, i, n int, env []string, name string, args ...string) (sample, error) {
	extraEnv = append(os.Environ(), env...)
	defer func() { extraEnv = nil }()
	return runOnce(log, what, i, n, name, args...)
}
