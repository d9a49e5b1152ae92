package analyze_test

import (
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/profiler"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// checkSums asserts the bookkeeping identities every result must satisfy: the
// bytes live at the peak are split over sites without loss or double counting.
func checkSums(t *testing.T, r *analyze.Result) {
	t.Helper()
	peak := func(s analyze.Site) int64 { return s.PeakBytes }
	var devPeaks int64
	for _, d := range r.Devices {
		devPeaks += d.Peak.Bytes
	}
	if got := sumSites(r.Sites, peak); got != r.Coverage.PeakBytes {
		t.Errorf("sites hold %d at the peak, attribution.peak_bytes is %d", got, r.Coverage.PeakBytes)
	}
	if got := sumSites(r.LeafSites, peak); got != r.Coverage.PeakBytes {
		t.Errorf("leaf sites hold %d at the peak, attribution.peak_bytes is %d", got, r.Coverage.PeakBytes)
	}
	if r.Coverage.PeakBytes != devPeaks {
		t.Errorf("attribution.peak_bytes %d, devices' peaks sum to %d", r.Coverage.PeakBytes, devPeaks)
	}
	if c := r.Coverage; c.UserLine+c.Phase+c.Tensor+c.Library+c.Unknown != c.PeakBytes {
		t.Errorf("user %d + phase %d + tensor %d + library %d + unknown %d != peak %d", c.UserLine, c.Phase, c.Tensor, c.Library, c.Unknown, c.PeakBytes)
	}
	var byKind = map[string]int64{}
	for _, s := range r.Sites {
		byKind[s.Kind] += s.PeakBytes
		if s.PeakBytes < 0 || s.AllocBytes < 0 || s.Allocs < 0 || s.CurrentBytes < 0 {
			t.Errorf("negative figure in site %+v", s)
		}
		if s.MaxAlloc > s.AllocBytes {
			t.Errorf("site %s:%d (%s): largest allocation %d exceeds all allocated %d", s.File, s.Line, s.Function, s.MaxAlloc, s.AllocBytes)
		}
	}
	// "[allocated before recording started]" is a phase-kind site, counted as unknown.
	if c := r.Coverage; byKind["user"] != c.UserLine || byKind["phase"] != c.Phase+c.Unknown || byKind["library"] != c.Library || byKind["tensor"] != c.Tensor {
		t.Errorf("per-kind site totals %v disagree with attribution %+v", byKind, r.Coverage)
	}
	var share float64
	for _, s := range r.Sites {
		share += s.PeakShare
	}
	if math.Abs(share-1) > 1e-6 {
		t.Errorf("peak shares of the sites sum to %.4f, want 1", share)
	}
}

func TestSiteTotalsAreConsistent(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			checkSums(t, r)
			if r.Coverage.PeakBytes != r.Peak.Bytes {
				t.Errorf("attribution.peak_bytes %d, peak.bytes %d (one device)", r.Coverage.PeakBytes, r.Peak.Bytes)
			}
			// Leaf sites are innermost frames: their kind is their file's.
			for _, s := range r.LeafSites {
				if s.Kind != "phase" && (s.Kind == "user") != profiler.IsUserFile(s.File) {
					t.Errorf("leaf site %s:%d (%s) has kind %q", s.File, s.Line, s.Function, s.Kind)
				}
			}
			// Sites are ordered by bytes at the peak.
			for i := 1; i < len(r.Sites); i++ {
				if r.Sites[i].PeakBytes > r.Sites[i-1].PeakBytes {
					t.Errorf("sites out of order at %d", i)
				}
			}
			// Top stacks: at most 20, ordered, each a part of the peak.
			var stacks int64
			if len(r.Stacks) == 0 || len(r.Stacks) > 20 {
				t.Errorf("%d top stacks", len(r.Stacks))
			}
			for i, st := range r.Stacks {
				stacks += st.PeakBytes
				if i > 0 && st.PeakBytes > r.Stacks[i-1].PeakBytes {
					t.Errorf("top stacks out of order at %d", i)
				}
				if len(st.Frames) == 0 {
					t.Errorf("top stack %d has no frames", i)
				}
			}
			if stacks > r.Peak.Bytes || r.Stacks[0].PeakBytes > r.Sites[0].PeakBytes {
				t.Errorf("top stacks hold %d (first %d), peak %d, top site %d", stacks, r.Stacks[0].PeakBytes, r.Peak.Bytes, r.Sites[0].PeakBytes)
			}
		})
	}
}

// current_bytes, allocs and alloc_bytes over all sites reproduce what the
// snapshot holds: the active blocks of its segments and its alloc entries.
func TestSiteTotalsMatchSnapshot(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			f := facts(t, in.name)
			var active, allocs, allocBytes int64
			for _, d := range f.Devices {
				active += d.ActiveBytes
				allocs += d.Allocs
				allocBytes += d.AllocBytes
			}
			for _, list := range []struct {
				name  string
				sites []analyze.Site
			}{{"sites", r.Sites}, {"leaf_sites", r.LeafSites}} {
				if got := sumSites(list.sites, func(s analyze.Site) int64 { return s.CurrentBytes }); got != active {
					t.Errorf("%s: current_bytes sum %d, active blocks in segments %d", list.name, got, active)
				}
				if got := sumSites(list.sites, func(s analyze.Site) int64 { return s.Allocs }); got != allocs {
					t.Errorf("%s: allocs sum %d, alloc entries %d", list.name, got, allocs)
				}
				if got := sumSites(list.sites, func(s analyze.Site) int64 { return s.AllocBytes }); got != allocBytes {
					t.Errorf("%s: alloc_bytes sum %d, alloc entries' sizes %d", list.name, got, allocBytes)
				}
			}
		})
	}
}

// At least 95% of what is live at the peak lands on a user line or a named
// phase, never on "somewhere in a library".
func TestAttributionCoverage(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			c := r.Coverage
			// Only what is named counts: memory from before recording that
			// nothing named (the model, in these full recordings) is not
			// attributed, but it is the only thing left out.
			if named := float64(c.UserLine+c.Phase+c.Tensor+c.Unknown) / float64(c.PeakBytes); named < 0.95 {
				t.Errorf("%.3f of the peak on lines, phases, tensors or before recording, < 0.95 (%+v)", named, c)
			}
			want := float64(c.UserLine+c.Phase+c.Tensor) / float64(c.PeakBytes)
			if math.Abs(c.Attributed-want) > 1e-9 {
				t.Errorf("attributed_share %.6f, (user+phase+tensor)/peak is %.6f", c.Attributed, want)
			}
			if c.Unknown > 0 && c.Attributed > 1-float64(c.Unknown)/float64(c.PeakBytes)+1e-9 {
				t.Errorf("attributed_share %.3f counts unknown bytes (%+v)", c.Attributed, c)
			}
			for _, s := range r.Sites {
				if s.Kind == "user" && (s.File == "" || s.Line <= 0 || !strings.HasSuffix(s.File, ".py")) {
					t.Errorf("user site without a source line: %+v", s)
				}
				if s.Kind == "phase" && s.Function == "" {
					t.Errorf("phase site without a name: %+v", s)
				}
			}
		})
	}
}

// GPT-2's forward pass (train_gpt2.py:22: model(input_ids=ids, labels=ids))
// holds the activations at the peak: it is the top user line. With gradient
// checkpointing (llama_lora_gc) the peak falls in the backward pass, whose
// recomputed activations belong to the backward() line, train_lora.py:40.
func TestTopUserSite(t *testing.T) {
	cases := map[string]string{
		"gpt2_train":             "train_gpt2.py:22",
		"oom_batch":              "train_gpt2.py:22",
		"gpt2_12l_python_stacks": "train_gpt2.py:22",
		"llama_lora_gc":          "train_lora.py:40",
		"example_train":          "record_examples.py:69",
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			r := result(t, name)
			for _, s := range r.Sites {
				if s.Kind != "user" {
					continue
				}
				if got := filepath.Base(s.File) + ":" + strconv.Itoa(s.Line); got != want {
					t.Errorf("top user site %s (%s), want %s", got, s.Function, want)
				}
				if s.PeakBytes < r.Peak.Bytes/4 {
					t.Errorf("top user site holds only %d of %d", s.PeakBytes, r.Peak.Bytes)
				}
				return
			}
			t.Fatal("no user site")
		})
	}
}

// The backward pass runs on autograd's thread without a Python stack. The
// last framed allocation before it is torch's seed gradient inside backward(),
// called from train_gpt2.py:23, so the frameless run belongs to that line
// instead of collapsing into one anonymous node.
func TestFramelessBackwardOnItsLine(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			for _, list := range [][]analyze.Site{r.Sites, r.LeafSites} {
				for _, s := range list {
					if s.Function == "[no frames]" || (s.Kind == "phase" && strings.TrimSpace(s.Function) == "") {
						t.Errorf("anonymous site %+v", s)
					}
				}
			}
		})
	}
	r := result(t, "gpt2_train")
	var phase, backward int64
	for _, s := range r.Sites {
		if s.Kind == "phase" {
			phase += s.PeakBytes
		}
		if s.Kind == "user" && strings.HasSuffix(s.File, "train_gpt2.py") && s.Line == 23 {
			backward += s.PeakBytes
			if s.Allocs < 100 || s.Function != "train_step" {
				t.Errorf("the backward() line holds only %d allocations (%+v): its pass is missing", s.Allocs, s)
			}
		}
	}
	if backward < r.Peak.Bytes/10 {
		t.Fatalf("the backward() line train_gpt2.py:23 holds %d of %d bytes at the peak; phases: %v", backward, r.Peak.Bytes, phaseNames(r))
	}
	if c := r.Coverage; phase <= 0 || phase != c.Phase+c.Unknown {
		t.Errorf("phase sites hold %d, attribution.phase_bytes %d + unknown_bytes %d", phase, c.Phase, c.Unknown)
	}
	// Half of all allocations have no frames (fixtures README): most of the
	// allocation traffic must land on the backward() line, not be dropped.
	var allocs int64
	for _, s := range r.Sites {
		if strings.HasSuffix(s.File, "train_gpt2.py") && s.Line == 23 {
			allocs += s.Allocs
		}
	}
	if f := facts(t, "gpt2_train"); allocs*4 < f.Devices[0].Allocs {
		t.Errorf("the backward() line counts %d of %d allocations", allocs, f.Devices[0].Allocs)
	}
}

func phaseNames(r *analyze.Result) []string {
	var out []string
	for _, s := range r.Sites {
		if s.Kind == "phase" {
			out = append(out, s.Function)
		}
	}
	return out
}

// Blocks alive at the end that the trace never allocated sum to the part of
// pre_trace_bytes the snapshot's segments account for; those without frames
// land on the "[allocated before recording started]" phase.
func TestPreTraceBlocks(t *testing.T) {
	for _, in := range inputs(t) {
		t.Run(in.name, func(t *testing.T) {
			r := result(t, in.name)
			f := facts(t, in.name)
			var noFrames int64
			for _, d := range f.Devices {
				noFrames += d.PreLiveNoFrames + d.PreFreedAfterPeak
			}
			var got int64
			for _, s := range r.Sites {
				if s.Kind == "phase" && strings.Contains(s.Function, "before recording started") {
					got += s.PeakBytes
					if s.Allocs != 0 {
						t.Errorf("pre-trace phase counts %d allocations", s.Allocs)
					}
				}
			}
			if got != noFrames {
				t.Errorf("\"allocated before recording started\" holds %d at the peak; blocks from before the trace with no allocation stack: %d", got, noFrames)
			}
		})
	}
}

// Memory allocated before recording started and freed inside the trace has no
// known allocation site: the free entry's frames are where it was freed
// (context="all"), so it must not be charged to that line.
func TestRingWrappedFreesAreNotChargedToTheFreeingLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wrapped.pickle")
	snaptool(t, "wrap", pathOf(t, "gpt2_train"), "2500", path)
	r, err := analyze.Run(path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := factsOf(t, path)
	d := f.Devices[0]
	if d.PreFreedAfterPeak == 0 {
		t.Fatal("no pre-trace block is freed after the peak: the test lost its point")
	}
	var pre int64
	for _, s := range r.Sites {
		if s.Kind == "phase" && strings.Contains(s.Function, "before recording started") {
			pre += s.PeakBytes
		}
	}
	if want := d.PreLiveNoFrames + d.PreFreedAfterPeak; pre != want {
		t.Errorf("\"allocated before recording started\" holds %d at the peak, want %d (%d alive at the end without frames + %d freed after the peak)",
			pre, want, d.PreLiveNoFrames, d.PreFreedAfterPeak)
	}
	// A user line's bytes at the peak can come only from its allocations in the
	// trace or from blocks still alive at the end (whose frames are the
	// allocation's): never more than it allocated plus what it holds now.
	for _, s := range r.Sites {
		if s.Kind == "user" && s.PeakBytes > s.AllocBytes+s.CurrentBytes {
			t.Errorf("%s:%d (%s) holds %d at the peak but allocated only %d in the trace and holds %d at the end",
				filepath.Base(s.File), s.Line, s.Function, s.PeakBytes, s.AllocBytes, s.CurrentBytes)
		}
	}
}

// leak_steps keeps every step's output alive: 8 steps of 2 MiB
// (record_examples.py:87, out = model(x)) are still held when the snapshot is
// taken.
func TestLeakedOutputsStayOnTheirLine(t *testing.T) {
	r := result(t, "leak_steps")
	sc := readSidecar(t, "leak_steps")
	if sc.Steps == 0 || sc.LeakPerStep == 0 {
		t.Fatal("sidecar lacks steps / leaked_per_step")
	}
	for _, s := range r.Sites {
		if filepath.Base(s.File) == "record_examples.py" && s.Line == 87 {
			if want := int64(sc.Steps) * sc.LeakPerStep; s.CurrentBytes < want {
				t.Errorf("line 87 holds %d at the end, the run leaked %d", s.CurrentBytes, want)
			}
			if s.Allocs < int64(sc.Steps) {
				t.Errorf("line 87 allocated %d times in %d steps", s.Allocs, sc.Steps)
			}
			return
		}
	}
	t.Fatal("no site at record_examples.py:87")
}

// Site.Add (the one place site figures are summed: the engine's sites and the
// language server's lines of two functions) folds the sites of a real run into
// the run's totals, and its two splits of the same memory (by user line, by
// innermost frame) into the same figures.
func TestSiteAdd(t *testing.T) {
	r := result(t, "example_train")
	fold := func(sites []analyze.Site) (all analyze.Site) {
		for _, s := range sites {
			all.Add(s)
		}
		return all
	}
	user, leaf := fold(r.Sites), fold(r.LeafSites)
	if user.PeakBytes != r.Coverage.PeakBytes || math.Abs(user.PeakShare-1) > 1e-9 {
		t.Errorf("summed sites: peak %d (run %d), share %v (one device: 1)", user.PeakBytes, r.Coverage.PeakBytes, user.PeakShare)
	}
	user.PeakShare, leaf.PeakShare = 0, 0 // sums of floats in two orders
	if user != leaf || user.Allocs == 0 || user.MaxAlloc == 0 || len(user.Categories.Named()) < 2 {
		t.Errorf("sites by user line sum to %+v, by innermost frame to %+v", user, leaf)
	}
}

// Every category field is listed where sites are summed and named: a category
// added to the struct alone would be dropped from summed sites (as kv_cache
// and graph_pool once were from the language server's lines).
func TestCategoryBytesFields(t *testing.T) {
	var cb analyze.CategoryBytes
	v := reflect.ValueOf(&cb).Elem()
	for i := range v.NumField() {
		v.Field(i).SetInt(int64(i + 1))
	}
	var sum analyze.Site
	sum.Add(analyze.Site{Categories: cb})
	sum.Add(analyze.Site{Categories: cb})
	got := reflect.ValueOf(sum.Categories)
	for i := range v.NumField() {
		if got.Field(i).Int() != int64(2*(i+1)) {
			t.Errorf("%s: summed %d, want %d", v.Type().Field(i).Name, got.Field(i).Int(), 2*(i+1))
		}
	}
	if n := len(cb.Named()); n != v.NumField() {
		t.Errorf("Named lists %d categories of %d", n, v.NumField())
	}
}
