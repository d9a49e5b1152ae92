package analyze

import (
	"fmt"
	"sort"
	"testing"
)

func TestFitDbgSizes(t *testing.T) {
	for _, f := range []string{"fit_gpt2m_bs2", "fit_gpt2s_bs2"} {
		r, _ := Run("../../docs/gpu/fit/"+f+".pickle", Options{KeepTrace: true})
		ft := r.peakDevice().fit
		type k struct {
			size     int64
			bwd, opt bool
			cls      fitClass
		}
		cnt := map[k]int{}
		share := map[k]float32{}
		for _, a := range ft.allocs {
			kk := k{a.size, a.bwd, a.opt, a.cls}
			cnt[kk]++
			share[kk] = a.fixedShare
		}
		var keys []k
		for x := range cnt {
			if x.cls == fitTokens {
				keys = append(keys, x)
			}
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].size*int64(cnt[keys[i]]) > keys[j].size*int64(cnt[keys[j]]) })
		fmt.Println(f)
		for _, x := range keys[:20] {
			fmt.Printf("  size %9d (%.2f MiB) bwd %v n %d fixedShare %.2f\n", x.size, float64(x.size)/(1<<20), x.bwd, cnt[x], share[x])
		}
	}
}

func TestFitDbgSurvivors(t *testing.T) {
	for _, f := range []string{"fit_gpt2m_bs2", "fit_gpt2s_bs2", "fit_llama_bs2"} {
		r, _ := Run("../../docs/gpu/fit/"+f+".pickle", Options{KeepTrace: true})
		ft := r.peakDevice().fit
		freed := make([]bool, len(ft.allocs))
		for _, e := range ft.ev {
			if e < 0 {
				freed[-e-1] = true
			}
		}
		var n int
		var bytes int64
		for i, a := range ft.allocs {
			if !freed[i] && a.cls == fitTokens {
				n++
				bytes += a.size
				if a.size > 1<<20 {
					fmt.Printf("  %s survivor size %d bwd %v opt %v saved %v\n", f, a.size, a.bwd, a.opt, a.saved)
				}
			}
		}
		fmt.Println(f, "survivors", n, bytes)
	}
}
