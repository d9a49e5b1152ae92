// Command bench measures vramscope against python3's bare pickle.load on the
// large real snapshots, and vramscope alone on a 50-million-entry snapshot made
// by vramscope-synth. It prints a table and writes it to docs/benchmarks.md.
// Run it from the repository root (make bench, or go run ./bench).
//
// Wall time is measured around each process; peak RSS is the process's
// ru_maxrss from wait4 — the figure GNU time's %M prints. Every figure is the
// median of -runs runs unless the table says otherwise.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	fixtures    = flag.String("fixtures", filepath.Join("..", "shared", "fixtures", "snapshots", "large"), "folder of the compressed large snapshots")
	work        = flag.String("dir", ".bench", "folder for decompressed and generated snapshots")
	runs        = flag.Int("runs", 3, "runs per figure (median)")
	pyRuns5M    = flag.Int("pyruns5m", 3, "python3 pickle.load runs on the 5M-entry snapshot (1 saves ~30 s)")
	synthRuns   = flag.Int("synthruns", 1, "vramscope analyze runs on the synthetic snapshot")
	entries     = flag.Int64("entries", 50_000_000, "entries in the synthetic snapshot")
	synthSource = flag.String("synthsource", "gpt2_long_1000k", "snapshot (in -dir) the synthetic one repeats")
	out         = flag.String("out", filepath.Join("docs", "benchmarks.md"), "markdown report")
	keep        = flag.Bool("keep", os.Getenv("KEEP") == "1", "keep the synthetic snapshot (also KEEP=1)")
)

const pyLoad = `import pickle,sys; pickle.load(open(sys.argv[1],"rb"))`

// sample is one run of a command.
type sample struct {
	wall time.Duration
	rss  int64 // bytes
}

// figure is the median of several runs.
type figure struct {
	sample
	n int
}

func (f figure) String() string {
	return fmt.Sprintf("%.2f s, %s", f.wall.Seconds(), mib(f.rss))
}

// runs says how many runs the median is of.
func (f figure) runs() string {
	if f.n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("median of %d", f.n)
}

func mib(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func main() {
	flag.Parse()
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	env := environment()
	log("bench: %s, %s, Go %s, Python %s, commit %s", env.cpu, env.memory, env.goVersion, env.pyVersion, env.commit)

	for _, c := range []string{"vramscope", "vramscope-synth"} {
		if err := run("go", "build", "-o", filepath.Join("bin", c), "./cmd/"+c); err != nil {
			fail(err)
		}
	}
	if err := os.MkdirAll(*work, 0o755); err != nil {
		fail(err)
	}

	type row struct {
		name    string
		size    int64
		entries string
		analyze figure
		python  figure
		pyRuns  int
	}
	var rows []row
	var cores string // the core-count table of the 5M-entry snapshot
	for _, name := range []string{"gpt2_long_1000k", "gpt2_long_5000k"} {
		path, err := decompress(name, log)
		if err != nil {
			fail(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			fail(err)
		}
		r := row{name: name, size: st.Size(), entries: sidecarEntries(name), pyRuns: *runs}
		if strings.Contains(name, "5000k") {
			r.pyRuns = *pyRuns5M
		}
		// Runs alternate between the two tools, so both see the same machine:
		// on a shared VM the speed of the cores drifts by tens of percent within minutes.
		var as, ps []sample
		for i := 0; i < max(*runs, r.pyRuns); i++ {
			if i < *runs {
				s, err := runOnce(log, "vramscope analyze "+name, i, *runs, filepath.Join("bin", "vramscope"), "analyze", "--json", path)
				if err != nil {
					fail(err)
				}
				as = append(as, s)
			}
			if i < r.pyRuns {
				s, err := runOnce(log, "python3 pickle.load "+name, i, r.pyRuns, "python3", "-c", pyLoad, path)
				if err != nil {
					fail(err)
				}
				ps = append(ps, s)
			}
		}
		r.analyze, r.python = summarize(as), summarize(ps)
		rows = append(rows, r)
		if strings.Contains(name, "5000k") {
			if cores, err = coreSection(log, name, path, r.size, r.python); err != nil {
				fail(err)
			}
		}
	}

	synthPath := filepath.Join(*work, fmt.Sprintf("synth_%s.pickle", strings.ToLower(count(*entries))))
	srcPath := filepath.Join(*work, *synthSource+".pickle")
	gen, err := measure(log, "vramscope-synth", 1, filepath.Join("bin", "vramscope-synth"), "-q", "-o", synthPath,
		"--entries", strconv.FormatInt(*entries, 10), srcPath)
	if err != nil {
		fail(err)
	}
	st, err := os.Stat(synthPath)
	if err != nil {
		fail(err)
	}
	synthSize := st.Size()
	syn, err := measure(log, "vramscope analyze synthetic", *synthRuns, filepath.Join("bin", "vramscope"), "analyze", "--json", synthPath)
	if !*keep {
		os.Remove(synthPath)
	}
	if err != nil {
		fail(err)
	}

	// The report.
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Written by `make bench` (`bench/main.go`) on %s.\n\n", env.date)
	fmt.Fprintf(&b, "| machine | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s, nproc %d |\n| memory | %s |\n| Go | %s |\n| Python | %s |\n| commit | %s |\n\n",
		env.cpu, env.nproc, env.memory, env.goVersion, env.pyVersion, env.commit)
	fmt.Fprintf(&b, "## Real snapshots: `vramscope analyze --json` beside `python3` `pickle.load`\n\n")
	fmt.Fprintf(&b, "Wall time and peak RSS of the whole process (ru_maxrss from wait4, as GNU time's %%M); each the median of the runs shown; the two tools run alternately, so both see the same machine (the speed of this shared VM drifts by tens of percent within minutes). ")
	fmt.Fprintf(&b, "`python3 -c '%s' FILE` only unpickles; vramscope also analyses. Goals: time ratio ≤ 0.25, RSS/file size ≤ 0.25.\n\n", pyLoad)
	fmt.Fprintf(&b, "| snapshot | file size | entries | vramscope analyze | python3 pickle.load | analyze time / python time | analyze RSS / file size |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		tr := r.analyze.wall.Seconds() / r.python.wall.Seconds()
		rr := float64(r.analyze.rss) / float64(r.size)
		fmt.Fprintf(&b, "| %s | %s | %s | %s (%s) | %s (%s) | %.3f %s | %.3f %s |\n", r.name, mib(r.size), r.entries,
			r.analyze, r.analyze.runs(), r.python, r.python.runs(), tr, mark(tr <= 0.25), rr, mark(rr <= 0.25))
	}
	b.WriteString(cores)
	fmt.Fprintf(&b, "\n## Synthetic snapshot\n\n")
	fmt.Fprintf(&b, "`vramscope-synth --entries %d %s.pickle` repeats the real trace's steps with shifted times and addresses "+
		"(internal/synth); python3 is not run on it (pickle.load takes about 6× the file size in memory, more than this machine may have). Goal: analyze RSS ≤ 512 MiB.\n\n",
		*entries, *synthSource)
	fmt.Fprintf(&b, "| entries | file size | generation (time, RSS) | generation rate | vramscope analyze (time, RSS) | analyze RSS ≤ 512 MiB |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %s | %s | %s | %.0f MB/s, %.0f ns/entry | %s (%s) | %s |\n", count(*entries), mib(synthSize), gen,
		float64(synthSize)/gen.wall.Seconds()/1e6, float64(gen.wall.Nanoseconds())/float64(*entries), syn, syn.runs(), mark(syn.rss <= 512<<20))

	b.WriteString(cancelSection(log, filepath.Join(*work, "gpt2_long_5000k.pickle")))

	lspCmd := exec.Command("go", "run", "./bench/lspbench", "-bin", filepath.Join("bin", "vramscope"), "-snapshot", filepath.Join(*work, "gpt2_long_1000k.pickle"))
	lspCmd.Stderr = os.Stderr
	if err := lspCmd.Run(); err != nil {
		log("bench: the language-server benchmark failed: %v", err)
	}
	if lsp, err := os.ReadFile(filepath.Join("docs", "lsp-bench.md")); err == nil {
		b.WriteString("\n" + string(lsp))
	}
	if w, err := os.ReadFile(filepath.Join("docs", "widget-bench.md")); err == nil {
		b.WriteString("\n" + string(w)) // make bench-widget: needs JupyterLab and chromium
	}
	b.WriteString(gpuSection())
	fmt.Print("\n" + b.String())
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fail(err)
	}
	log("bench: wrote %s", *out)
}

// gpuSection carries the daemon and agent figures measured on the GPU machine
// by make gpu-e2e (docs/gpu-e2e.md) into this report: this machine has no GPU.
func gpuSection() string {
	doc, err := os.ReadFile(filepath.Join("docs", "gpu-e2e.md"))
	if err != nil {
		return ""
	}
	_, sec, ok := strings.Cut(string(doc), "\n## Benchmarks")
	if !ok {
		return ""
	}
	return "\n## Daemon and agent on the H200 (from docs/gpu-e2e.md, `make gpu-e2e`)\n\nNot measured by `make bench`: copied from the last GPU run.\n\n### Benchmarks" + sec
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// count writes 50000000 as 50M and 1000000 as 1M.
func count(n int64) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.FormatInt(n, 10)
}

// measure runs a command n times with stdout discarded and returns the median
// wall time and the median peak RSS.
func measure(log func(string, ...any), what string, n int, name string, args ...string) (figure, error) {
	var ss []sample
	for i := 0; i < n; i++ {
		s, err := runOnce(log, what, i, n, name, args...)
		if err != nil {
			return figure{}, err
		}
		ss = append(ss, s)
	}
	return summarize(ss), nil
}

// extraEnv, when set, is the whole environment of the next runOnce (runOnceEnv).
var extraEnv []string

// runOnce runs a command and reads its wall time and peak RSS.
func runOnce(log func(string, ...any), what string, i, n int, name string, args ...string) (sample, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = extraEnv // nil: this process's environment
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %v\n%s", what, err, stderr.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return sample{}, errors.New("no rusage on this system")
	}
	s := sample{wall: wall, rss: ru.Maxrss << 10} // Linux reports KiB
	log("  %s, run %d/%d: %.2f s, %s", what, i+1, n, s.wall.Seconds(), mib(s.rss))
	return s, nil
}

// summarize takes the medians of wall time and of peak RSS.
func summarize(ss []sample) figure {
	n := len(ss)
	f := figure{n: n}
	sort.Slice(ss, func(i, j int) bool { return ss[i].wall < ss[j].wall })
	f.wall = ss[len(ss)/2].wall
	sort.Slice(ss, func(i, j int) bool { return ss[i].rss < ss[j].rss })
	f.rss = ss[len(ss)/2].rss
	return f
}

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return nil
}

// decompress makes .bench/NAME.pickle from NAME.pickle.xz unless it is
// already there with the size xz records.
func decompress(name string, log func(string, ...any)) (string, error) {
	src := filepath.Join(*fixtures, name+".pickle.xz")
	dst := filepath.Join(*work, name+".pickle")
	want, err := xzSize(src)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(dst); err == nil && st.Size() == want {
		return dst, nil
	}
	log("  decompressing %s (%s)", src, mib(want))
	start := time.Now()
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	cmd := exec.Command("xz", "-dc")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, f, os.Stderr
	err = cmd.Run()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(tmp); err == nil && st.Size() != want {
			err = fmt.Errorf("%s: decompressed to %d bytes, xz says %d", src, st.Size(), want)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	log("  decompressed in %.1f s", time.Since(start).Seconds())
	return dst, os.Rename(tmp, dst)
}

// xzSize reads the uncompressed size from xz --list --robot.
func xzSize(path string) (int64, error) {
	outb, err := exec.Command("xz", "--list", "--robot", path).Output()
	if err != nil {
		return 0, fmt.Errorf("xz --list %s: %v", path, err)
	}
	for _, line := range strings.Split(string(outb), "\n") {
		if f := strings.Split(line, "\t"); len(f) > 4 && f[0] == "totals" {
			return strconv.ParseInt(f[4], 10, 64)
		}
	}
	return 0, fmt.Errorf("xz --list %s: no totals line", path)
}

// sidecarEntries reads trace_entries from the .json beside a snapshot.
func sidecarEntries(name string) string {
	b, err := os.ReadFile(filepath.Join(*fixtures, name+".json"))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.Trim(k, `" `) == "trace_entries" {
			if n, err := strconv.ParseInt(strings.Trim(v, " ,"), 10, 64); err == nil {
				return count(n)
			}
		}
	}
	return "?"
}

type env struct {
	date, cpu, memory, goVersion, pyVersion, commit string
	nproc                                           int
}

func environment() env {
	e := env{date: time.Now().UTC().Format("2006-01-02 15:04 MST"), nproc: runtime.NumCPU(), cpu: "?", memory: "?"}
	if out, err := exec.Command("nproc").Output(); err == nil {
		e.nproc, _ = strconv.Atoi(strings.TrimSpace(string(out)))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				e.cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == "MemTotal" {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				e.memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
		f.Close()
	}
	e.goVersion = firstLine(exec.Command("go", "env", "GOVERSION"))
	e.pyVersion = firstLine(exec.Command("python3", "-c", "import sys; print(sys.version.split()[0])"))
	e.commit = firstLine(exec.Command("git", "rev-parse", "--short=12", "HEAD"))
	if st := firstLine(exec.Command("git", "status", "--porcelain", "--untracked-files=no")); st != "" && st != "?" {
		e.commit += " (with uncommitted changes)"
	}
	return e
}

func firstLine(cmd *exec.Cmd) string {
	out, err := cmd.Output()
	if err != nil {
		return "?"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}
