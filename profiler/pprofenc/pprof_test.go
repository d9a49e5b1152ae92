package pprofenc_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/vramscope/vramscope/internal/reftool"
	"github.com/vramscope/vramscope/profiler/analyze"
	"github.com/vramscope/vramscope/profiler/pprofenc"
)

var fixture = filepath.Join("..", "..", "..", "shared", "fixtures", "snapshots", "gpt2_train.pickle")

func load(t *testing.T) *analyze.Result {
	t.Helper()
	if _, err := os.Stat(fixture); err != nil {
		reftool.Missing(t, "fixture not available: %v", err)
	}
	r, err := analyze.Run(fixture, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func totals(r *analyze.Result) (peak, allocBytes, allocs int64) {
	for _, s := range r.Sites {
		peak += s.PeakBytes
		allocBytes += s.AllocBytes
		allocs += s.Allocs
	}
	return
}

// The written profile parses back with the sample types pprof's heap views
// expect, and its totals are the analysis's: bytes live at the peak, bytes
// and allocations over the trace.
func TestWriteParsesBack(t *testing.T) {
	r := load(t)
	var b bytes.Buffer
	if err := pprofenc.Write(&b, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte{0x1f, 0x8b}) {
		t.Error("profile is not gzipped")
	}
	p, err := profile.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got := strings.Join(types, ","); got != "inuse_space/bytes,alloc_space/bytes,alloc_objects/count" {
		t.Errorf("sample types %s", got)
	}
	if p.DefaultSampleType != "inuse_space" {
		t.Errorf("default sample type %q", p.DefaultSampleType)
	}
	var sum [3]int64
	for _, s := range p.Sample {
		for i, v := range s.Value {
			sum[i] += v
		}
		if len(s.Location) == 0 {
			t.Error("sample without a stack")
		}
	}
	peak, allocBytes, allocs := totals(r)
	if peak != r.Peak.Bytes {
		t.Fatalf("sites hold %d at the peak, peak %d", peak, r.Peak.Bytes)
	}
	if sum[0] != r.Peak.Bytes || sum[1] != allocBytes || sum[2] != allocs {
		t.Errorf("profile totals inuse %d, alloc %d bytes, %d objects; analysis: peak %d, %d bytes, %d allocations",
			sum[0], sum[1], sum[2], r.Peak.Bytes, allocBytes, allocs)
	}
	// Leaf first: the first location of the largest sample is an allocating
	// library frame, its last the outermost <module> frame.
	var top *profile.Sample
	for _, s := range p.Sample {
		if top == nil || s.Value[0] > top.Value[0] {
			top = s
		}
	}
	leaf := top.Location[0].Line[0].Function
	root := top.Location[len(top.Location)-1].Line[0].Function
	if root.Name != "train_gpt2.<module>" || root.SystemName != "<module>" || filepath.Base(root.Filename) != "train_gpt2.py" {
		t.Errorf("outermost frame of the largest sample: %s (%s)", root.Name, root.Filename)
	}
	if filepath.Base(leaf.Filename) == "train_gpt2.py" {
		t.Errorf("innermost frame of the largest sample is user code: %s (%s)", leaf.Name, leaf.Filename)
	}
	if b := pprofenc.Build(r); len(b.Sample) != len(p.Sample) {
		t.Errorf("Build: %d samples, written %d", len(b.Sample), len(p.Sample))
	}
}

// `go tool pprof` reads the file and shows the model's code at the top.
func TestGoToolPprof(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go tool pprof")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		reftool.Missing(t, "go not in PATH")
	}
	r := load(t)
	path := filepath.Join(t.TempDir(), "gpt2_train.pb.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprofenc.Write(f, r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, idx := range []string{"inuse_space", "alloc_space"} {
		cmd := exec.Command(goBin, "tool", "pprof", "-top", "-cum", "-sample_index="+idx, path)
		cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof -sample_index=%s: %v\n%s", idx, err, out)
		}
		s := string(out)
		if !strings.Contains(s, "train_gpt2.train_step") || !strings.Contains(s, "modeling_gpt2.forward") {
			t.Errorf("-sample_index=%s: top lacks train_step/forward:\n%s", idx, s)
		}
		if !strings.Contains(s, "Type: "+idx) {
			t.Errorf("-sample_index=%s: output does not say which type it shows:\n%s", idx, s)
		}
	}
}
