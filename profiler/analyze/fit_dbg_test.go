package analyze

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

func TestFitDbgVerify(t *testing.T) {
	b, _ := os.ReadFile("../../docs/gpu/fit/fit_verify.json")
	var doc struct {
		Runs []struct {
			Name, Label, Kind string
			Batch, Seq        int64
			Cap               int64
			MicroBatch        int64    `json:"micro_batch"`
			Accumulation      int64    `json:"accumulation"`
			Checkpoint        []string `json:"checkpoint"`
			Measured          struct {
				OOM          bool  `json:"oom"`
				MaxAllocated int64 `json:"max_allocated"`
				MaxReserved  int64 `json:"max_reserved"`
			} `json:"measured"`
		} `json:"runs"`
	}
	json.Unmarshal(b, &doc)
	models := map[string]*FitModel{}
	rec := map[string]FitSize{"gpt2s": {2, 512}, "gpt2m": {2, 256}, "llama": {2, 512}, "oom": {16, 512}, "oom_notrace": {16, 512}}
	file := map[string]string{"gpt2s": "fit_gpt2s_bs2", "gpt2m": "fit_gpt2m_bs2", "llama": "fit_llama_bs2", "oom": "fit_oom_bs16", "oom_notrace": "fit_oom_bs16_notrace"}
	for _, r := range doc.Runs {
		m := models[r.Name]
		if m == nil {
			res, err := Run("../../docs/gpu/fit/"+file[r.Name]+".pickle", Options{KeepTrace: true})
			if err != nil {
				t.Fatal(err)
			}
			m, err = res.FitModel(rec[r.Name])
			if err != nil {
				t.Fatal(err)
			}
			models[r.Name] = m
		}
		v := FitVariant{MicroBatch: r.MicroBatch, Accumulation: r.Accumulation}
		for i := range r.Checkpoint {
			v.Checkpoint = append(v.Checkpoint, i)
		}
		p := m.Predict(FitSize{r.Batch, r.Seq}, v, 0)
		fmt.Printf("%-12s %5dx%-5d %-50.50s pred %6.2f meas %6.2f (%+5.1f%%) res %6.2f vs %6.2f (%+5.1f%%) oom=%v %s\n", r.Name, r.Batch, r.Seq, r.Label,
			gib(p.Allocated), gib(r.Measured.MaxAllocated), pctD(p.Allocated, r.Measured.MaxAllocated),
			gib(p.Reserved), gib(r.Measured.MaxReserved), pctD(p.Reserved, r.Measured.MaxReserved), r.Measured.OOM, p.Phase)
	}
}

func gib(b int64) float64    { return float64(b) / (1 << 30) }
func pctD(a, b int64) float64 { return 100 * (float64(a)/float64(b) - 1) }
