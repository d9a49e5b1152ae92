package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/analyze"
)

type ranksCmd struct {
	source
	daemon daemonFlags
}

// runRanks shows the ranks of one job side by side: a stored group (by its
// ID, from the daemon) or snapshot files copied from each host.
func runRanks(args []string, stdout, stderr io.Writer) int {
	var c ranksCmd
	fs := flag.NewFlagSet("ranks", flag.ContinueOnError)
	c.register(fs)
	fs.StringVar(&c.daemon.socket, "socket", "", "the daemon's socket, for a GROUP (default as vramscope serve)")
	fs.BoolVar(&c.daemon.json, "json", false, "print the rank view as JSON (analyze.Ranks)")
	pos, ok := parse(fs, args, stderr)
	if !ok {
		return exitInput
	}
	if len(pos) == 0 {
		fmt.Fprintln(stderr, "vramscope ranks: want a group ID (see vramscope snap --job) or one snapshot file per rank")
		return exitInput
	}
	var rv *analyze.Ranks
	var err error
	if len(pos) == 1 && store.ValidGroupID(pos[0]) {
		rv = &analyze.Ranks{}
		err = c.daemon.call(api.AnalysisRanks, api.RanksParams{Group: pos[0]}, rv, 5*time.Minute)
	} else {
		rv, err = c.fromFiles(pos, stderr)
	}
	if err != nil {
		return fail(stderr, err)
	}
	if c.daemon.json {
		return printJSON(stdout, stderr, rv)
	}
	writeRanks(stdout, rv)
	return exitOK
}

// fromFiles analyses one snapshot per rank. A file's rank is its meta's
// (the store's <id>.json, or NAME.meta.json beside it), else its name's.
func (c *ranksCmd) fromFiles(paths []string, stderr io.Writer) (*analyze.Ranks, error) {
	var snaps []analyze.RankSnapshot
	paths, err := expandRankDirs(paths)
	if err != nil {
		return nil, inputError{err}
	}
	for _, p := range paths {
		rs, err := rankOf(p)
		if err != nil {
			return nil, inputError{err}
		}
		if rs.Result, err = c.load(p, stderr); err != nil {
			return nil, err
		}
		snaps = append(snaps, rs)
	}
	rv, err := analyze.CompareRanks(snaps)
	if err != nil {
		return nil, inputError{err}
	}
	return rv, nil
}

// expandRankDirs replaces each folder among paths by the rank files in it:
// its snapshots whose name or meta file gives a rank (metas themselves and
// other files are left out).
func expandRankDirs(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || !st.IsDir() {
			out = append(out, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		n := len(out)
		for _, e := range entries {
			name := filepath.Join(p, e.Name())
			if e.IsDir() || strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			if _, err := rankOf(name); err == nil {
				out = append(out, name)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s: no rank files in it (rank3.pickle, snapshot_3.pickle, or a vramscope meta file beside a snapshot)", p)
		}
	}
	return out, nil
}

// fileMeta is what vramscope's meta files say about a rank's snapshot.
type fileMeta struct {
	SHA256   string `json:"sha256"`
	Reason   string `json:"reason"`
	Rank     *int   `json:"rank"`
	Device   int    `json:"device"`
	ByNVML   bool   `json:"device_by_nvml"`
	GPUBytes int64  `json:"gpu_bytes"`
	Group    string `json:"group"`
}

func rankOf(path string) (analyze.RankSnapshot, error) {
	rs := analyze.RankSnapshot{Source: path, Device: -1}
	stem := strings.TrimSuffix(path, filepath.Ext(path))
	for _, mp := range []string{stem + ".meta.json", stem + ".json"} {
		b, err := os.ReadFile(mp)
		if err != nil {
			continue
		}
		var m fileMeta
		// Only a vramscope meta counts: the analysis goldens beside the
		// examples are also NAME.json.
		if json.Unmarshal(b, &m) != nil || m.SHA256 == "" || m.Reason == "" || m.Rank == nil {
			continue
		}
		rs.Rank, rs.GPUBytes = *m.Rank, m.GPUBytes
		if m.ByNVML {
			rs.Device = m.Device
		}
		return rs, nil
	}
	r, ok := analyze.RankFromName(path)
	if !ok {
		return rs, fmt.Errorf("%s: no rank in its name (rank3.pickle, snapshot_3.pickle) nor a vramscope meta file beside it", path)
	}
	rs.Rank = r
	return rs, nil
}

// writeRanks prints the rank table, the categories of each rank, and each
// outlier's lines against the median rank.
func writeRanks(w io.Writer, rv *analyze.Ranks) {
	fmt.Fprintf(w, "%d ranks; median rank %d (peak %s); imbalance %.2f (max/median peak, rank %d)\n\n",
		len(rv.Ranks), rv.MedianRank, fb(rv.MedianPeak), rv.Imbalance, rv.MaxRank)
	fmt.Fprintf(w, "%5s %4s %11s %11s %11s %7s %4s  %s\n", "RANK", "GPU", "PEAK", "RESERVED", "NON-TORCH", "×MED", "OOM", "TOP LINE")
	cuda := false
	for _, r := range rv.Ranks {
		gpu, nonTorch, mark := fmt.Sprintf("%d", r.Device), "-", ""
		if !r.NVMLSeen {
			gpu, cuda = fmt.Sprintf("c%d", r.Device), true // CUDA's index in the process, not NVML's
		}
		if r.GPUBytes > 0 {
			nonTorch = fb(r.NonPyTorch)
		}
		if r.Outlier {
			mark = "*"
		}
		top := "-"
		if len(r.Top) > 0 {
			top = fmt.Sprintf("%s %s", fb(r.Top[0].PeakBytes), where(r.Top[0].File, r.Top[0].Line, r.Top[0].Function))
		}
		oom := "-"
		if r.OOMs > 0 {
			oom = "OOM"
		}
		fmt.Fprintf(w, "%5d %4s %11s %11s %11s %6.2f%1s %4s  %s\n", r.Rank, gpu, fb(r.Peak), fb(r.Reserved), nonTorch, r.VsMedian, mark, oom, top)
	}
	fmt.Fprintf(w, "* outlier: peak more than %.0f%% from the median rank's\n", 100*rv.Tolerance)
	if cuda {
		fmt.Fprintln(w, "cN: CUDA's device N in the process (NVML's index not known: no NVML, or no device UUID from the agent)")
	}
	writeRankOOMs(w, rv)
	writeRankCategories(w, rv)
	for _, o := range rv.Outliers {
		fmt.Fprintf(w, "\nrank %d against the median rank %d: peak %s\n", o.Rank, rv.MedianRank, signed(o.PeakDelta))
		fmt.Fprintf(w, "  %11s %11s %11s  %s\n", "peak Δ", fmt.Sprintf("rank %d", rv.MedianRank), fmt.Sprintf("rank %d", o.Rank), "line")
		for _, l := range o.Lines {
			fmt.Fprintf(w, "  %11s %11s %11s  %s\n", signed(l.PeakDelta), fb(l.PeakBefore), fb(l.PeakAfter), where(l.File, l.Line, l.Function))
		}
	}
}

// writeRankOOMs says which ranks ran out of memory, asking for what, where.
func writeRankOOMs(w io.Writer, rv *analyze.Ranks) {
	for _, r := range rv.Ranks {
		if o := r.OOM; o != nil {
			more := ""
			if r.OOMs > 1 {
				more = fmt.Sprintf(" (first of %d)", r.OOMs)
			}
			if c := o.CapText(); c != "" {
				more += fmt.Sprintf(" under %s (the device had %s free)", c, fb(int64(o.DeviceFree)))
			}
			fmt.Fprintf(w, "rank %d ran out of memory%s: asked for %s with %s allocated, %s reserved, at %s\n",
				r.Rank, more, fb(o.Requested), fb(o.Allocated), fb(o.Reserved), where(o.File, o.Line, o.Function))
		}
	}
}

func writeRankCategories(w io.Writer, rv *analyze.Ranks) {
	if len(rv.Ranks) == 0 || len(rv.Ranks[0].Categories) == 0 {
		return
	}
	fmt.Fprintf(w, "\nat each rank's peak:\n%5s", "RANK")
	for _, c := range rv.Ranks[0].Categories {
		fmt.Fprintf(w, " %15s", c.Name)
	}
	fmt.Fprintln(w)
	for _, r := range rv.Ranks {
		fmt.Fprintf(w, "%5d", r.Rank)
		for _, c := range r.Categories {
			fmt.Fprintf(w, " %15s", fb(c.Bytes))
		}
		fmt.Fprintln(w)
	}
}

func where(file string, line int, fn string) string {
	if file == "" {
		return fn
	}
	return fmt.Sprintf("%s:%d (%s)", file, line, fn)
}

// snapJob asks the daemon for a snapshot of every rank of pid's launch.
func snapJob(f daemonFlags, p api.GroupTakeParams, timeout time.Duration, stdout, stderr io.Writer) int {
	var g api.GroupResult
	if err := f.call(api.GroupTake, p, &g, timeout+10*time.Second); err != nil {
		return fail(stderr, err)
	}
	if f.json {
		return printJSON(stdout, stderr, g)
	}
	fmt.Fprintf(stdout, "group %s (%s): %d ranks, skew %.1f ms\n", g.ID, g.Job, len(g.Members), g.SkewMS)
	for _, s := range g.Snapshots {
		fmt.Fprintf(stdout, "  rank %-4d pid %-7d snapshot %s  %s\n", s.Rank, s.PID, s.ID, fb(s.Bytes))
	}
	for _, e := range g.Failed {
		fmt.Fprintf(stdout, "  rank %-4d pid %-7d FAILED: %s\n", e.Rank, e.PID, e.Error)
	}
	fmt.Fprintf(stdout, "compare them: vramscope ranks %s\n", g.ID)
	return exitOK
}
