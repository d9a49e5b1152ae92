package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler"
)

// storedPath is the file of a stored snapshot named by its ID (as
// `vramscope snapshots` lists them) when no file of that name exists here:
// every command that reads a snapshot takes either.
func storedPath(arg string) (string, error) {
	if _, err := os.Stat(arg); err == nil || !store.ValidID(arg) {
		return arg, nil
	}
	var f daemonFlags
	var res api.SnapshotResult
	if err := f.call(api.SnapshotGet, api.IDParams{ID: arg}, &res, 10*time.Second); err != nil {
		return "", inputError{fmt.Errorf("%s: no such file, and the daemon's store could not be asked for it: %w", arg, err)}
	}
	return res.Path, nil
}

// runImport copies a snapshot file into the daemon's store (snapshot.import).
func runImport(args []string, stdout, stderr io.Writer) int {
	var label string
	f, pos, ok := parseDaemonCmd("import", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&label, "label", "", "free text stored with the snapshot")
	})
	if !ok {
		return exitInput
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "vramscope import: want one snapshot file")
		return exitInput
	}
	abs, err := filepath.Abs(pos[0])
	if err != nil {
		return fail(stderr, inputError{err})
	}
	cwd, _ := os.Getwd()
	var res api.SnapshotResult
	if err := f.call(api.SnapshotImport, api.ImportParams{Path: abs, Label: label, Cwd: cwd}, &res, 5*time.Minute); err != nil {
		return fail(stderr, err)
	}
	if f.json {
		return printJSON(stdout, stderr, res)
	}
	fmt.Fprintf(stdout, "snapshot %s: %s\n%s\nanalyse it: vramscope analyze %s\n", res.ID, profiler.FormatBytes(res.Bytes), res.Path, res.ID)
	return exitOK
}

// writeSnapshots lists the stored snapshots under a header, each with its
// file and peak; those holding an OOM are marked; an empty store says so.
func writeSnapshots(w io.Writer, snaps []api.SnapshotResult) {
	if len(snaps) == 0 {
		fmt.Fprintln(w, "no stored snapshots: take one with `vramscope snap PID`, or store a file with `vramscope import FILE`")
		return
	}
	fmt.Fprintf(w, "%-26s %-7s %4s %10s %10s %-7s %-4s  %s\n", "ID", "REASON", "OOM", "PEAK", "SIZE", "PID", "RANK", "SOURCE / FILE")
	for _, s := range snaps {
		oom := "-"
		if s.Reason == "oom" || s.OOMs > 0 {
			oom = "OOM"
		}
		peak := "-" // not analysed yet
		if s.PeakBytes > 0 {
			peak = profiler.FormatBytes(s.PeakBytes)
		}
		pod := ""
		if s.Pod != "" {
			pod = fmt.Sprintf("  pod %s/%s (%s)", s.Namespace, s.Pod, s.Container)
		} else if s.PodUID != "" {
			pod = "  pod uid " + s.PodUID
		}
		fmt.Fprintf(w, "%-26s %-7s %4s %10s %10s %-7d %-4d  %s%s\n%35s%s\n", s.ID, s.Reason, oom, peak, profiler.FormatBytes(s.Bytes), s.PID, s.Rank,
			s.Source, pod, "", s.Path)
	}
	fmt.Fprintln(w, "analyse one: vramscope analyze ID (OOM: it holds an out-of-memory error; PEAK: allocated at its peak, - until the daemon has analysed it)")
}
