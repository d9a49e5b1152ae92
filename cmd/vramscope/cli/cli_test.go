package cli_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"

	"github.com/google/pprof/profile"

	"github.com/vramscope/vramscope/cmd/vramscope/cli"
	"github.com/vramscope/vramscope/profiler/flame"
)

var (
	fixtureDir = filepath.Join("..", "..", "..", "..", "shared", "fixtures", "snapshots")
	exampleDir = filepath.Join("..", "..", "..", "examples", "snapshots")
	trainerDir = filepath.Join("..", "..", "..", "..", "shared", "fixtures", "trainer")
)

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func need(t *testing.T, p string) string {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		t.Skipf("not available: %v", err)
	}
	return p
}

func example(t *testing.T, name string) string {
	return need(t, filepath.Join(exampleDir, name+".pickle"))
}

func fixture(t *testing.T, name string) string {
	return need(t, filepath.Join(fixtureDir, name+".pickle"))
}

type outcome struct {
	code           int
	stdout, stderr string
}

func run(args ...string) outcome {
	var o, e bytes.Buffer
	code := cli.Main(args, &o, &e)
	return outcome{code, o.String(), e.String()}
}

func (o outcome) String() string {
	return "exit " + strconv.Itoa(o.code) + "\nstderr: " + o.stderr + "\nstdout: " + truncate(o.stdout, 2000)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func mustRun(t *testing.T, args ...string) outcome {
	t.Helper()
	o := run(args...)
	if o.code != 0 {
		t.Fatalf("vramscope %s: %v", strings.Join(args, " "), o)
	}
	return o
}

// The text report on the repository's example, with recorded paths found
// under the repository by --root. Machine paths are replaced by <REPO>.
func TestAnalyzeGolden(t *testing.T) {
	repo := abs(t, filepath.Join("..", "..", ".."))
	snap := abs(t, example(t, "example_train"))
	// The examples were recorded in a checkout at /work/main. Where that path
	// exists outside this checkout, it is the local file and --root rightly
	// leaves it alone.
	const recorded = "/work/main/examples/record/record_examples.py"
	if _, err := os.Stat(recorded); err == nil && !strings.HasPrefix(recorded, repo+string(filepath.Separator)) {
		t.Skipf("%s exists outside this checkout (%s)", recorded, repo)
	}
	o := mustRun(t, "analyze", snap, "--root", repo)
	if o.stderr != "" {
		t.Errorf("stderr: %q", o.stderr)
	}
	out := strings.ReplaceAll(o.stdout, repo, "<REPO>")
	if !strings.Contains(out, "<REPO>/examples/record/record_examples.py:69") {
		t.Errorf("the top line is not mapped under the repository:\n%s", out)
	}
	if strings.Contains(out, "/work/main/") {
		t.Errorf("output keeps the recording machine's path:\n%s", out)
	}
	golden.Check(t, "analyze_example_train.golden", []byte(out))
}

// The JSON has the documented keys and agrees with the run's own measurement.
func TestAnalyzeJSON(t *testing.T) {
	snap := example(t, "example_train")
	o := mustRun(t, "analyze", "--json", snap)
	var v map[string]any
	if err := json.Unmarshal([]byte(o.stdout), &v); err != nil {
		t.Fatalf("analyze --json is not JSON: %v", err)
	}
	hasKeys(t, "result", v, "file", "file_bytes", "events", "peak", "devices", "sites", "leaf_sites", "top_stacks",
		"attribution", "ooms", "findings", "allocator_settings", "annotations")
	hasKeys(t, "peak", v["peak"], "bytes", "time_us", "device", "event")
	hasKeys(t, "attribution", v["attribution"], "peak_bytes", "user_line_bytes", "phase_bytes", "library_only_bytes", "attributed_share")
	devs, _ := v["devices"].([]any)
	if len(devs) != 1 {
		t.Fatalf("devices: %v", v["devices"])
	}
	hasKeys(t, "device", devs[0], "device", "events", "peak", "allocator", "timeline", "pre_trace_bytes", "start_us", "end_us")
	d := devs[0].(map[string]any)
	hasKeys(t, "timeline", d["timeline"], "device", "points", "markers")
	hasKeys(t, "allocator", d["allocator"], "reserved", "allocated", "requested", "pending_free", "internal_free",
		"external_free", "largest_free_block", "free_blocks", "segments", "expandable_segments",
		"private_pool_segments", "expandable_setting", "fragmentation", "per_segment")
	sites, _ := v["sites"].([]any)
	if len(sites) == 0 {
		t.Fatal("no sites")
	}
	hasKeys(t, "site", sites[0], "file", "line", "function", "kind", "peak_bytes", "current_bytes", "alloc_bytes",
		"allocs", "max_alloc", "peak_share")

	var side struct {
		MaxAllocated float64 `json:"max_allocated"`
	}
	b, err := os.ReadFile(strings.TrimSuffix(snap, ".pickle") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &side); err != nil {
		t.Fatal(err)
	}
	peak := v["peak"].(map[string]any)["bytes"].(float64)
	if diff := (peak - side.MaxAllocated) / side.MaxAllocated; diff > 0.01 || diff < -0.01 {
		t.Errorf("peak %.0f, the run measured %.0f", peak, side.MaxAllocated)
	}
	if v["file"] != snap {
		t.Errorf("file %v, want %q", v["file"], snap)
	}
}

func hasKeys(t *testing.T, what string, v any, keys ...string) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s is %T, not an object", what, v)
		return
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q", what, k)
		}
	}
}

// Flags may follow the file.
func TestFlagsAfterFile(t *testing.T) {
	snap := example(t, "leak_steps")
	before := mustRun(t, "analyze", "--json", "--top", "3", snap)
	after := mustRun(t, "analyze", snap, "--json", "--top", "3")
	if before.stdout != after.stdout {
		t.Error("analyze FILE --json differs from analyze --json FILE")
	}
	if !json.Valid([]byte(after.stdout)) {
		t.Error("analyze FILE --json did not print JSON")
	}
	text := mustRun(t, "analyze", snap, "--top", "2")
	// The section is a header row and then one row per line.
	if n := strings.Count(sectionOf(text.stdout, "Top lines"), "\n") - 1; n != 2 {
		t.Errorf("--top 2 after the file: %d lines listed\n%s", n, text.stdout)
	}
	f := mustRun(t, "flame", snap, "--format", "collapsed", "--weight", "alloc")
	if strings.Contains(f.stdout, "<html") || !strings.Contains(f.stdout, ";") {
		t.Errorf("flame FILE --format collapsed: %s", truncate(f.stdout, 300))
	}
}

// sectionOf returns the lines after the line starting with title up to the
// next blank line.
func sectionOf(out, title string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, title):
			in = true
		case in && line == "":
			return b.String()
		case in:
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func peakOf(t *testing.T, snap string) (peak, allocBytes int64) {
	t.Helper()
	var r struct {
		Peak struct {
			Bytes int64 `json:"bytes"`
		} `json:"peak"`
		Sites []struct {
			AllocBytes int64 `json:"alloc_bytes"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "analyze", "--json", snap).stdout), &r); err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Sites {
		allocBytes += s.AllocBytes
	}
	return r.Peak.Bytes, allocBytes
}

func TestFlameFormats(t *testing.T) {
	snap := example(t, "example_train")
	peak, allocBytes := peakOf(t, snap)
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name) }

	o := mustRun(t, "flame", snap, "--format", "html", "-o", out("f.html"))
	if o.stdout != "" {
		t.Errorf("flame -o printed %q", truncate(o.stdout, 200))
	}
	html := readFile(t, out("f.html"))
	if !strings.HasPrefix(html, "<!DOCTYPE html>") || !strings.Contains(html, "VramscopeFlame") {
		t.Errorf("not the flame page: %s", truncate(html, 200))
	}
	for _, bad := range []string{"http://", "https://"} {
		if strings.Contains(html, bad) {
			t.Errorf("the page refers to %s: it must work offline", bad)
		}
	}
	// The default format is the page, on standard output.
	if d := mustRun(t, "flame", snap); d.stdout != html {
		t.Error("flame FILE (defaults) differs from --format html -o")
	}
	// -o - is standard output too, not a file named "-".
	if d := mustRun(t, "flame", snap, "-o", "-"); d.stdout != html {
		t.Error("flame -o - differs from the page on standard output")
	}
	if _, err := os.Stat("-"); err == nil {
		os.Remove("-")
		t.Error(`flame -o - wrote a file named "-"`)
	}

	mustRun(t, "flame", snap, "--format", "json", "-o", out("f.json"))
	var tr flame.Tree
	if err := json.Unmarshal([]byte(readFile(t, out("f.json"))), &tr); err != nil {
		t.Fatalf("flame --format json: %v", err)
	}
	if tr.Weight != flame.WeightPeak || tr.Root == nil || tr.Root.Value != peak {
		t.Errorf("json tree: weight %q, root %+v; want peak, %d", tr.Weight, tr.Root, peak)
	}

	mustRun(t, "flame", snap, "--format", "json", "--weight", "alloc", "-o", out("alloc.json"))
	var ta flame.Tree
	if err := json.Unmarshal([]byte(readFile(t, out("alloc.json"))), &ta); err != nil {
		t.Fatal(err)
	}
	if ta.Weight != flame.WeightAlloc || ta.Root.Value != allocBytes {
		t.Errorf("alloc tree: weight %q, root %d; want alloc, %d", ta.Weight, ta.Root.Value, allocBytes)
	}

	mustRun(t, "flame", snap, "--format", "collapsed", "-o", out("f.txt"))
	var sum int64
	sc := bufio.NewScanner(strings.NewReader(readFile(t, out("f.txt"))))
	for sc.Scan() {
		line := sc.Text()
		n, err := strconv.ParseInt(line[strings.LastIndexByte(line, ' ')+1:], 10, 64)
		if err != nil {
			t.Fatalf("collapsed line %q", line)
		}
		sum += n
	}
	if sum != peak {
		t.Errorf("collapsed stacks sum to %d, peak %d", sum, peak)
	}

	mustRun(t, "flame", snap, "--format", "pprof", "-o", out("f.pb.gz"))
	f, err := os.Open(out("f.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("flame --format pprof: %v", err)
	}
	var inuse int64
	for _, s := range p.Sample {
		inuse += s.Value[0]
	}
	if inuse != peak {
		t.Errorf("pprof inuse_space %d, peak %d", inuse, peak)
	}

	// analyze --html writes the linked report: the same flame tree, and the
	// report data beside it (the same as analyze --report prints).
	a := mustRun(t, "analyze", snap, "--html", out("a.html"))
	if !strings.Contains(a.stdout, out("a.html")) {
		t.Errorf("analyze --html does not say where the page is")
	}
	page := readFile(t, out("a.html"))
	if scriptData(page, "vramscope-data") != scriptData(html, "vramscope-data") {
		t.Error("analyze --html holds another flame tree than flame's page")
	}
	rep := mustRun(t, "analyze", snap, "--report").stdout
	var got, want any
	if err := json.Unmarshal([]byte(scriptData(page, "vramscope-report")), &got); err != nil {
		t.Fatalf("analyze --html: the report data: %v", err)
	}
	if err := json.Unmarshal([]byte(rep), &want); err != nil {
		t.Fatalf("analyze --report: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("analyze --html holds other report data than analyze --report prints")
	}
}

// scriptData is the text of the JSON script element id of a page.
func scriptData(page, id string) string {
	_, after, ok := strings.Cut(page, `<script type="application/json" id="`+id+`">`)
	if !ok {
		return ""
	}
	data, _, _ := strings.Cut(after, "</script>")
	return data
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Misuse exits 2 with one line on stderr and nothing on stdout.
func TestUsageErrors(t *testing.T) {
	snap := example(t, "cuda_graph")
	for _, args := range [][]string{
		{"flame", snap, "--weight", "bogus"},
		{"flame", snap, "--format", "bogus"},
		{"analyze"},
		{"analyze", snap, snap},
		{"diff", snap},
		{"analyze", snap, "--map", "nope"},
		{"analyze", snap, "--no-such-flag"},
		{"bogus"},
		{},
	} {
		o := run(args...)
		if o.code != 2 {
			t.Errorf("vramscope %s: exit %d, want 2\n%v", strings.Join(args, " "), o.code, o)
		}
		if o.stdout != "" {
			t.Errorf("vramscope %s: printed %q on stdout", strings.Join(args, " "), truncate(o.stdout, 200))
		}
		if o.stderr == "" {
			t.Errorf("vramscope %s: nothing on stderr", strings.Join(args, " "))
		}
	}
	for _, args := range [][]string{{"flame", snap, "--weight", "bogus"}, {"flame", snap, "--format", "bogus"}, {"analyze", snap, "--map", "nope"}} {
		if o := run(args...); strings.Count(strings.TrimSuffix(o.stderr, "\n"), "\n") != 0 {
			t.Errorf("vramscope %s: stderr is not one line: %q", strings.Join(args, " "), o.stderr)
		}
	}
	if o := run("flame", snap, "--weight", "bogus"); !strings.Contains(o.stderr, "weight") {
		t.Errorf("--weight bogus: stderr %q does not name the flag", o.stderr)
	}
}

// A usage error must not touch the output file: no empty file left behind,
// and an earlier flame graph at that path survives.
func TestFlameUsageErrorKeepsOutputFile(t *testing.T) {
	snap := example(t, "cuda_graph")
	dir := t.TempDir()
	out := filepath.Join(dir, "new.html")
	if o := run("flame", snap, "--format", "bogus", "-o", out); o.code != 2 {
		t.Fatalf("exit %d", o.code)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("flame --format bogus -o %s created the file", out)
	}
	prev := filepath.Join(dir, "prev.html")
	mustRun(t, "flame", snap, "-o", prev)
	before := readFile(t, prev)
	if o := run("flame", snap, "--format", "svg", "-o", prev); o.code != 2 {
		t.Fatalf("exit %d", o.code)
	}
	if after := readFile(t, prev); after != before {
		t.Errorf("flame --format svg -o %s replaced the earlier page (%d bytes) with %d bytes", prev, len(before), len(after))
	}
}

func TestVersionAndHelp(t *testing.T) {
	o := mustRun(t, "version")
	if strings.TrimSpace(o.stdout) != "vramscope "+cli.Version {
		t.Errorf("version printed %q", o.stdout)
	}
	h := run("help")
	if h.code != 0 || !strings.Contains(h.stdout, "analyze") || !strings.Contains(h.stdout, "flame") || !strings.Contains(h.stdout, "diff") {
		t.Errorf("help: %v", h)
	}
}

// badInputs writes files that are not snapshots, each a different way.
func badInputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	write := func(name string, b []byte) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	files["missing.pickle"] = filepath.Join(dir, "missing.pickle")
	write("notes.txt", []byte("peak was 5 GiB\nsee train.py\n"))
	write("empty.pickle", nil)
	good, err := os.ReadFile(example(t, "cuda_graph"))
	if err != nil {
		t.Fatal(err)
	}
	write("truncated.pickle", good[:len(good)/2])
	write("truncated_header.pickle", good[:3])
	if xz, err := exec.LookPath("xz"); err == nil {
		out, err := exec.Command(xz, "-c", example(t, "cuda_graph")).Output()
		if err != nil {
			t.Fatal(err)
		}
		write("snapshot.pickle.xz", out)
	} else {
		write("snapshot.pickle.xz", append([]byte("\xfd7zXZ\x00\x00\x04"), good[:64]...))
	}
	// pickle.dumps({'a': 1}, protocol=4)
	write("dict.pickle", []byte("\x80\x04\x95\n\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94K\x01s."))
	// pickle.dumps(collections.OrderedDict(a=1), protocol=2): GLOBAL + REDUCE
	write("global.pickle", []byte("\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01X\x01\x00\x00\x00aq\x02K\x01s."))
	// The classic exploit: GLOBAL os.system, REDUCE. Were it run, it would
	// create the file TestBadInputs looks for.
	cmd := "touch " + filepath.Join(dir, "pwned")
	exploit := []byte("\x80\x02cos\nsystem\nq\x00X")
	exploit = binary.LittleEndian.AppendUint32(exploit, uint32(len(cmd)))
	exploit = append(exploit, cmd...)
	exploit = append(exploit, "q\x01\x85q\x02Rq\x03."...)
	write("exploit.pickle", exploit)
	// pickle.dumps(5, protocol=4)
	write("int.pickle", []byte("\x80\x04K\x05."))
	files["directory"] = dir
	return files
}

// Every unreadable input exits 2 with exactly one line on stderr naming the
// file, for every command that reads snapshots, and never panics.
func TestBadInputs(t *testing.T) {
	good := example(t, "cuda_graph")
	bad := badInputs(t)
	defer func() {
		if _, err := os.Stat(filepath.Join(bad["directory"], "pwned")); err == nil {
			t.Error("reading exploit.pickle ran os.system")
		}
	}()
	for name, path := range bad {
		for _, args := range [][]string{
			{"analyze", path},
			{"analyze", path, "--json"},
			{"flame", path, "--format", "json"},
			{"diff", good, path},
			{"diff", path, good},
		} {
			t.Run(name+"/"+args[0], func(t *testing.T) {
				var o outcome
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("panic: %v", p)
						}
					}()
					o = run(args...)
				}()
				if o.code != 2 {
					t.Errorf("exit %d, want 2\n%v", o.code, o)
				}
				if o.stdout != "" {
					t.Errorf("stdout %q", truncate(o.stdout, 200))
				}
				msg := strings.TrimSuffix(o.stderr, "\n")
				if msg == "" || strings.Contains(msg, "\n") || !strings.HasSuffix(o.stderr, "\n") {
					t.Errorf("stderr is not one line: %q", o.stderr)
				}
				if !strings.Contains(msg, path) {
					t.Errorf("stderr %q does not name %s", msg, path)
				}
			})
		}
	}
}

func TestDiff(t *testing.T) {
	a, b := example(t, "example_train"), example(t, "leak_steps")
	o := mustRun(t, "diff", a, b, "--json")
	var d struct {
		Before    string `json:"before"`
		After     string `json:"after"`
		PeakA     int64  `json:"peak_before"`
		PeakB     int64  `json:"peak_after"`
		PeakDelta int64  `json:"peak_delta"`
		New       int    `json:"new_sites"`
		Gone      int    `json:"gone_sites"`
		Sites     []struct {
			Status    string `json:"status"`
			PeakDelta int64  `json:"peak_delta"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &d); err != nil {
		t.Fatalf("diff --json: %v", err)
	}
	pa, _ := peakOf(t, a)
	pb, _ := peakOf(t, b)
	if d.Before != a || d.After != b || d.PeakA != pa || d.PeakB != pb || d.PeakDelta != pb-pa {
		t.Errorf("diff %s -> %s: peak %d -> %d (%d); analyze says %d -> %d", d.Before, d.After, d.PeakA, d.PeakB, d.PeakDelta, pa, pb)
	}
	n, g := 0, 0
	for _, s := range d.Sites {
		switch s.Status {
		case "new":
			n++
		case "gone":
			g++
		}
	}
	if n != d.New || g != d.Gone || n == 0 || g == 0 {
		t.Errorf("new %d gone %d, statuses say %d, %d", d.New, d.Gone, n, g)
	}
	// Same file twice: nothing changed.
	same := mustRun(t, "diff", a, a)
	if !strings.Contains(same.stdout, "0 new sites, 0 gone") {
		t.Errorf("diff A A:\n%s", same.stdout)
	}
	rows := 0
	for _, line := range strings.Split(same.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[0] == "peak" {
			continue
		}
		rows++
		// "0 B  705.64 MiB  705.64 MiB  same  file:line"
		if f[0] != "0" || f[6] != "same" {
			t.Errorf("diff A A row: %q", line)
		}
	}
	if rows == 0 {
		t.Errorf("diff A A lists no sites:\n%s", same.stdout)
	}
	// Flags after both files.
	if o2 := mustRun(t, "diff", a, b, "--json", "--top", "3"); o2.stdout != o.stdout {
		t.Error("diff A B --json --top 3 differs from diff A B --json")
	}
	// --html: the after side's report with the before timeline and this diff; --report prints its data.
	page := filepath.Join(t.TempDir(), "diff.html")
	if h := mustRun(t, "diff", a, b, "--html", page); !strings.Contains(h.stdout, "report: "+page) {
		t.Errorf("diff --html does not say where the page is:\n%s", h.stdout)
	}
	var rep struct {
		File   string                `json:"file"`
		Before struct{ File string } `json:"before"`
		Diff   json.RawMessage       `json:"diff"`
	}
	data := scriptData(readFile(t, page), "vramscope-report")
	if err := json.Unmarshal([]byte(data), &rep); err != nil {
		t.Fatalf("diff --html report data: %v", err)
	}
	var inPage any
	json.Unmarshal(rep.Diff, &inPage)
	var plain any
	json.Unmarshal([]byte(o.stdout), &plain)
	if rep.File != b || rep.Before.File != a || !reflect.DeepEqual(inPage, plain) {
		t.Errorf("diff --html: after %s, before %s; its diff equals --json's: %v", rep.File, rep.Before.File, reflect.DeepEqual(inPage, plain))
	}
	if r := mustRun(t, "diff", a, b, "--report"); strings.TrimSpace(r.stdout) == "" || !json.Valid([]byte(r.stdout)) {
		t.Errorf("diff --report: %.200s", r.stdout)
	}
}

// --map rewrites the container path to the local trainer folder.
func TestAnalyzeMap(t *testing.T) {
	snap := fixture(t, "gpt2_train")
	local := abs(t, need(t, trainerDir))
	o := mustRun(t, "analyze", snap, "--json", "--map", "/workspace/trainer="+local)
	var r struct {
		Sites []struct {
			File string `json:"file"`
			Kind string `json:"kind"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, s := range r.Sites {
		if s.Kind != "user" {
			continue
		}
		users++
		if st, err := os.Stat(s.File); err != nil || !st.Mode().IsRegular() {
			t.Errorf("user site file %s does not exist locally", s.File)
		}
	}
	if users == 0 {
		t.Error("no user sites")
	}
	text := mustRun(t, "analyze", snap, "--map", "/workspace/trainer="+local, "--root", local)
	if strings.Contains(text.stdout, "/workspace/trainer/") {
		t.Errorf("text report still shows the container path:\n%s", text.stdout)
	}
}

// whatif: sizes from the file names or --sizes, the same fit either way, and
// clear errors for what cannot be fitted.
func TestWhatIf(t *testing.T) {
	var files []string
	for _, b := range []string{"2", "4", "8"} {
		files = append(files, example(t, filepath.Join("whatif", "whatif_bs"+b)))
	}
	byName := mustRun(t, append([]string{"whatif", "--json", "--device-memory", "80GiB", "--predict", "12"}, files...)...)
	bySizes := mustRun(t, append([]string{"whatif", "--sizes", "2,4,8", "--json", "--device-memory", "80GiB", "--predict", "12"}, files...)...)
	if byName.stdout != bySizes.stdout {
		t.Error("sizes from file names and from --sizes give different fits")
	}
	var w struct {
		Model      string `json:"model"`
		MaxSize    int64  `json:"max_size"`
		MaxSizeFit int64  `json:"max_size_fit"`
		Points     []struct {
			Size      float64 `json:"size"`
			Allocated int64   `json:"peak_allocated"`
		} `json:"points"`
		Predictions []struct {
			Size      float64 `json:"size"`
			Allocated int64   `json:"peak_allocated"`
			Fits      *bool   `json:"fits"`
		} `json:"predictions"`
	}
	if err := json.Unmarshal([]byte(byName.stdout), &w); err != nil {
		t.Fatal(err)
	}
	if len(w.Points) != 3 || w.Model != "linear" || w.MaxSize <= 16 || w.MaxSize > w.MaxSizeFit {
		t.Fatalf("%+v", w)
	}
	for i, f := range files {
		if p, _ := peakOf(t, f); p != w.Points[i].Allocated {
			t.Errorf("%s: point %d, analyze's peak %d", f, w.Points[i].Allocated, p)
		}
	}
	if p := w.Predictions[0]; p.Allocated <= w.Points[2].Allocated || p.Fits == nil || !*p.Fits {
		t.Errorf("prediction at 12: %+v", p)
	}
	text := mustRun(t, append([]string{"whatif", "--device-memory", "80GiB"}, files...)...)
	if !strings.Contains(text.stdout, fmt.Sprintf("largest size that fits: %d", w.MaxSize)) || !strings.Contains(text.stdout, "activation +") {
		t.Errorf("text report:\n%s", text.stdout)
	}
	for _, bad := range [][]string{
		{"whatif", files[0]},
		{"whatif", "--sizes", "2,4", files[0], files[1], files[2]},
		{"whatif", files[0], files[0]},
		{"whatif", "--model", "cubic", files[0], files[1]},
		{"whatif", example(t, "example_train"), files[0], "--sizes", "x,2"},
	} {
		if o := run(bad...); o.code != 2 || o.stderr == "" {
			t.Errorf("%v: %v", bad, o)
		}
	}
}

// convert: a VSM1 stream (as the agent writes) becomes PyTorch's pickle, which
// analyses as the stream does; what is not VSM1 is an input error.
func TestConvert(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	src := example(t, "example_train")
	vsm := filepath.Join(dir, "ex.vsm")
	pkg := abs(t, filepath.Join("..", "..", "..", "jupyter"))
	cmd := exec.Command(py, "-c", "import sys, pickle; sys.path.insert(0, sys.argv[1]); from vramscope.agent._vsm import write_vsm; "+
		"write_vsm(pickle.load(open(sys.argv[2], 'rb')), open(sys.argv[3], 'wb'), chunk_entries=700)", pkg, src, vsm)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	o := mustRun(t, "convert", vsm)
	back := filepath.Join(dir, "ex.pickle")
	if strings.TrimSpace(o.stdout) != back {
		t.Fatalf("convert printed %q", o.stdout)
	}
	same := exec.Command(py, "-c", "import pickle, sys; sys.exit(pickle.load(open(sys.argv[1], 'rb')) != pickle.load(open(sys.argv[2], 'rb')))", src, back)
	if out, err := same.CombinedOutput(); err != nil {
		t.Errorf("the converted pickle differs from the original: %v %s", err, out)
	}
	a, _ := peakOf(t, vsm)
	b, _ := peakOf(t, back)
	if a != b || a == 0 {
		t.Errorf("peak of the stream %d, of the pickle %d", a, b)
	}
	if o := run("convert", src, "-o", filepath.Join(dir, "x.pickle")); o.code != 2 || !strings.Contains(o.stderr, "not a VSM1 stream") {
		t.Errorf("convert of a pickle: %v", o)
	}
}
