package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/cmd/vramscope/cli"
	"github.com/vramscope/vramscope/internal/daemontest"
	"github.com/vramscope/vramscope/internal/synth"
	"github.com/vramscope/vramscope/profiler"
)

// analyze's text says how many annotated steps ended before the trace's
// first event, and counts only the steps inside it.
func TestAnalyzeSaysStepsBeforeTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.pickle")
	if _, err := synth.GenerateFile(path, fixture(t, "gpt2_train"),
		synth.Options{Entries: 200_000, MaxAnnotatedReps: 1 << 20, AnnotationsBeforeTrace: true}); err != nil {
		t.Fatal(err)
	}
	o := mustRun(t, "analyze", path)
	m := regexp.MustCompile(`Steps \((\d+), from annotations; (\d+) more ended before the trace's first event, not counted: their memory was not recorded\)`).FindStringSubmatch(o.stdout)
	if m == nil {
		t.Fatalf("no steps line saying what lies before the trace:\n%s", o.stdout)
	}
	in, before := atoi(t, m[1]), atoi(t, m[2])
	if in == 0 || before == 0 {
		t.Errorf("%d steps inside, %d before", in, before)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The rank view shows which rank ran out of memory (the README's case: an OOM
// on one rank captures the others): an OOM column, a line saying what it
// asked for where, and the JSON's oom_ranks and per-rank oom.
func TestRanksShowOOM(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "examples", "ranks", "out", "snapshots")
	files := []string{need(t, filepath.Join(dir, "rank0_oom.pickle")), need(t, filepath.Join(dir, "rank1_oom.pickle"))}
	o := mustRun(t, append([]string{"ranks"}, files...)...)
	if !regexp.MustCompile(`(?m)^\s+1 .* OOM  `).MatchString(o.stdout) || !strings.Contains(o.stdout, "rank 1 ran out of memory under a per-process cap of at most") {
		t.Errorf("ranks text:\n%s", o.stdout)
	}
	var rv struct {
		OOMRanks []int `json:"oom_ranks"`
		Ranks    []struct {
			Rank int `json:"rank"`
			OOMs int `json:"ooms"`
			OOM  *struct {
				Requested int64 `json:"requested"`
			} `json:"oom"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, append([]string{"ranks", "--json"}, files...)...).stdout), &rv); err != nil {
		t.Fatal(err)
	}
	if len(rv.OOMRanks) != 1 || rv.OOMRanks[0] != 1 || rv.Ranks[0].OOM != nil || rv.Ranks[1].OOMs == 0 ||
		rv.Ranks[1].OOM == nil || rv.Ranks[1].OOM.Requested <= 0 {
		t.Errorf("ranks --json: %+v", rv)
	}
}

// diff of a healthy run and a run that ran out of memory says so, with what
// the failed run needed (its peak alone misses the request that failed).
func TestDiffShowsOOM(t *testing.T) {
	o := mustRun(t, "diff", fixture(t, "gpt2_train"), fixture(t, "oom_batch"))
	m := regexp.MustCompile(`(?m)^after ran out of memory: asked for 1\.53 GiB with 5\.14 GiB allocated \(it needed at least 6\.67 GiB\), under a per-process cap of at most [0-9.]+ GiB, at .*train_gpt2\.py:22`).FindString(o.stdout)
	if m == "" || strings.Contains(o.stdout, "before ran out") {
		t.Errorf("diff text:\n%s", o.stdout)
	}
	var d struct {
		Before *struct{ Requested int64 } `json:"oom_before"`
		After  *struct{ Requested int64 } `json:"oom_after"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "diff", "--json", fixture(t, "oom_batch"), fixture(t, "gpt2_train")).stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d.Before == nil || d.Before.Requested <= 0 || d.After != nil {
		t.Errorf("diff --json: oom_before %+v, oom_after %+v", d.Before, d.After)
	}
}

// A size without a unit under 1 MiB is refused with what was probably meant
// (--device-memory 80 was 80 bytes: "the peak reaches 7272922240% of the
// device"); a unit, or a bare byte count, is taken.
func TestSizeWithoutUnitRefused(t *testing.T) {
	snap := fixture(t, "gpt2_train")
	for _, args := range [][]string{{"analyze", "--device-memory", "80", snap}, {"whatif", "--device-memory", "80", snap}} {
		o := run(args...)
		if o.code != 2 || !strings.Contains(o.stderr, `"80" has no unit and would be 80 bytes: did you mean 80GiB or 80MiB?`) {
			t.Errorf("vramscope %v: %v", args, o)
		}
	}
	for _, size := range []string{"80GiB", "85899345920", "0.5MiB"} {
		if o := run("analyze", "--device-memory", size, snap); o.code != 0 {
			t.Errorf("--device-memory %s: %v", size, o)
		}
	}
}

// Where analyze prints the fragmentation figure it says what it measures and
// when it matters (healthy runs print 77-88% beside "Findings: none").
func TestFragmentationExplained(t *testing.T) {
	o := mustRun(t, "analyze", fixture(t, "gpt2_12l_python_stacks"))
	re := regexp.MustCompile(`fragmentation (\d+)%\n  \(fragmentation: the free memory inside segments, ([0-9.]+ [KMG]iB), is in pieces; the largest, ([0-9.]+ [KMG]iB), is the biggest request served without a new segment. It matters only near`)
	m := re.FindStringSubmatch(o.stdout)
	if m == nil || atoi(t, m[1]) < 50 || !strings.Contains(o.stdout, "Findings:\n  none") {
		t.Errorf("no explained fragmentation beside no findings:\n%s", o.stdout)
	}
}

// flame without -o refuses to write HTML or a gzipped profile to a terminal
// (it names -o), and still writes them to a pipe or a file, or with -o -.
func TestFlameNotToTerminal(t *testing.T) {
	snap := fixture(t, "gpt2_train")
	out, err := os.Create(filepath.Join(t.TempDir(), "tty"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	restore := cli.FakeTerminal(time.Now)
	defer restore()
	for _, format := range []string{"html", "pprof"} {
		var e bytes.Buffer
		if code := cli.Main([]string{"flame", "--format", format, snap}, out, &e); code != 2 || !strings.Contains(e.String(), "not writing") || !strings.Contains(e.String(), "-o FILE") {
			t.Errorf("flame --format %s to a terminal: exit %d, %s", format, code, e.String())
		}
	}
	if st, _ := out.Stat(); st.Size() != 0 {
		t.Errorf("%d bytes written to the terminal", st.Size())
	}
	var e bytes.Buffer
	if code := cli.Main([]string{"flame", "--format", "json", snap}, out, &e); code != 0 {
		t.Errorf("flame --format json to a terminal: exit %d, %s", code, e.String())
	}
	if code := cli.Main([]string{"flame", "-o", "-", snap}, out, &e); code != 0 {
		t.Errorf("flame -o - to a terminal: exit %d, %s", code, e.String())
	}
	restore()
	var buf bytes.Buffer
	if code := cli.Main([]string{"flame", snap}, &buf, &e); code != 0 || !strings.HasPrefix(buf.String(), "<!DOCTYPE html>") {
		t.Errorf("flame to a pipe: exit %d, %.40q", code, buf.String())
	}
}

// The store from the command line: an empty store says so; import stores a
// file (snapshot.import) and names its ID; snapshots lists it under a header
// with its file; analyze takes the ID as it takes the file.
func TestStoredSnapshotsFromTheCLI(t *testing.T) {
	t.Setenv("VRAMSCOPE_SOCKET", daemontest.Start(t).Socket)
	if o := mustRun(t, "snapshots"); !strings.HasPrefix(o.stdout, "no stored snapshots: take one with `vramscope snap PID`") {
		t.Errorf("empty store: %q", o.stdout)
	}
	snap := fixture(t, "oom_batch")
	o := mustRun(t, "import", "--label", "from the test", snap)
	m := regexp.MustCompile(`^snapshot (\S+): `).FindStringSubmatch(o.stdout)
	if m == nil {
		t.Fatalf("import: %q", o.stdout)
	}
	id := m[1]
	var peak struct {
		Peak struct{ Bytes int64 } `json:"peak"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "analyze", "--json", snap).stdout), &peak); err != nil || peak.Peak.Bytes <= 0 {
		t.Fatalf("analyze --json: %v", err)
	}
	// An imported OOM is marked as one, with the analysis's peak (written once
	// the daemon's analysis is cached: a moment after the import answers).
	row := regexp.MustCompile(regexp.QuoteMeta(id) + `\s+import\s+OOM\s+` + regexp.QuoteMeta(profiler.FormatBytes(peak.Peak.Bytes)) + `\s`)
	var list string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list = mustRun(t, "snapshots").stdout
		if row.MatchString(list) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(list, "ID ") || !strings.Contains(list, "PEAK") || !row.MatchString(list) {
		t.Errorf("snapshots (want %s import OOM %s):\n%s", id, profiler.FormatBytes(peak.Peak.Bytes), list)
	}
	var path string
	for _, l := range strings.Split(list, "\n") {
		if f := strings.TrimSpace(l); strings.HasPrefix(f, "/") {
			path = f
		}
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Errorf("the listed file %q: %v", path, err)
	}
	byID, byFile := mustRun(t, "analyze", id).stdout, mustRun(t, "analyze", snap).stdout
	first := func(s string) string { return s[strings.Index(s, "\n")+1:] } // the first line names the file
	if first(byID) != first(byFile) {
		t.Errorf("analyze %s differs from analyze of the file:\n%s", id, byID)
	}
	if o := run("analyze", "20991231T000000.000Z-0001"); o.code != 2 || !strings.Contains(o.stderr, "20991231T000000.000Z-0001") {
		t.Errorf("analyze of an unknown ID: %v", o)
	}
}

// ranks DIR reads the rank files in the folder (metas and other files left
// out), as the files named one by one; a folder without any says so.
func TestRanksOfAFolder(t *testing.T) {
	src := filepath.Join("..", "..", "..", "examples", "ranks", "out", "snapshots")
	dir := t.TempDir()
	var files []string
	for _, n := range []string{"rank0_oom.pickle", "rank1_oom.pickle"} {
		dst := filepath.Join(dir, n)
		if err := os.Symlink(abs(t, need(t, filepath.Join(src, n))), dst); err != nil {
			t.Fatal(err)
		}
		files = append(files, dst)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the job's notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	byDir, byFiles := mustRun(t, "ranks", dir).stdout, mustRun(t, append([]string{"ranks"}, files...)...).stdout
	if byDir != byFiles || !strings.Contains(byDir, "2 ranks") {
		t.Errorf("ranks DIR:\n%s\nranks FILES:\n%s", byDir, byFiles)
	}
	empty := t.TempDir()
	if o := run("ranks", empty); o.code != 2 || !strings.Contains(o.stderr, empty+": no rank files in it") {
		t.Errorf("ranks of an empty folder: %v", o)
	}
}

// help --help is the help there is, not a usage error.
func TestHelpHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "--help"}, {"help", "-h"}} {
		if o := run(args...); o.code != 0 || !strings.Contains(o.stdout, "analyze") {
			t.Errorf("vramscope %v: %v", args, o)
		}
	}
}

// After --format, --weight, --bundle and --daemon the shells offer the
// flag's values, not file names.
func TestCompletionOffersValues(t *testing.T) {
	for sh, want := range map[string]string{"zsh": ":value:(html json collapsed pprof)", "fish": "-l format -x -a 'html json collapsed pprof'"} {
		if o := run("completion", sh); !strings.Contains(o.stdout, want) {
			t.Errorf("completion %s lacks %q", sh, want)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := run("completion", "bash").stdout
	for _, c := range []struct{ words, want string }{
		{"vramscope flame --format j", "json"},
		{`vramscope flame snap.pickle --weight ""`, "peak alloc current"},
		{"vramscope analyze --bundle a", "alloc"},
		{"vramscope lsp --daemon c", "connect"},
		{"vramscope flame --format json --ke", "--keep-wrappers"},
	} {
		if out, err := bashComplete(bash, script, c.words); err != nil || out != c.want {
			t.Errorf("bash completing %q: %q, %v; want %q", c.words, out, err, c.want)
		}
	}
}

// bashComplete runs the bash completion script on the words typed so far
// (the last one being completed) and returns what it offers.
func bashComplete(bash, script, words string) (string, error) {
	cmd := exec.Command(bash, "-c", script+"\nCOMP_WORDS=("+words+"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _vramscope; echo \"${COMPREPLY[*]}\"")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// attach with a Python that lacks the agent says what to install, before
// any daemon is started; a Python that is not there is named.
func TestAttachWithoutAgent(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	bare := filepath.Join(t.TempDir(), "python")
	// -S: no site-packages, so no vramscope whatever this machine installed.
	if err := os.WriteFile(bare, []byte("#!/bin/sh\nexec "+py+" -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VRAMSCOPE_SOCKET", filepath.Join(t.TempDir(), "none.sock"))
	o := run("attach", "--python", bare, "1")
	if o.code != 2 || !strings.Contains(o.stderr, "has no vramscope package (the agent): install it") || !strings.Contains(o.stderr, "-m pip install ./jupyter") {
		t.Errorf("attach with a bare Python: %v", o)
	}
	if o := run("attach", "--python", filepath.Join(t.TempDir(), "nopython"), "1"); o.code != 2 || !strings.Contains(o.stderr, "no Python at") {
		t.Errorf("attach with no Python: %v", o)
	}
}
