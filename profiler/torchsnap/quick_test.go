package torchsnap

import (
	"fmt"
	"testing"
	"time"

	"github.com/vramscope/vramscope/profiler"
)

func TestQuick(t *testing.T) {
	for _, n := range []string{"gpt2_train", "llama_lora_gc", "oom_batch", "gpt2_12l_python_stacks"} {
		fr := profiler.NewFrames()
		cnt := map[profiler.Action]int{}
		t0 := time.Now()
		s, err := ReadFile("../../../shared/fixtures/snapshots/"+n+".pickle", fr, func(tr int, e *profiler.Event) error { cnt[e.Action]++; return nil }, Options{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(n, time.Since(t0), cnt, len(s.Segments), len(s.Annotations), fr.NumStacks(), fr.NumFrames(), s.TraceDevices, s.Settings.ExpandableSegments)
	}
}
