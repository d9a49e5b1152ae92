package analyze

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// What fits in generation, from one recorded run: the peak of a batch of
// prompts generating new tokens is the weights, plus every sequence's KV
// cache at its full length (with one layer's keys copied again as the cache
// grows), plus what each sequence holds besides its cache; or, where the
// prompt's forward pass holds more than that, the weights plus the prompt's
// cache and its activations. The recording says how much each of those is
// per sequence and per token (its categories at the peak and over the
// timeline), so a larger batch or a longer sequence scales them.

// GenerateSize is one generation's size: Batch sequences of Prompt tokens
// generating New tokens ("16x512+256").
type GenerateSize struct {
	Batch  int64 `json:"batch"`
	Prompt int64 `json:"prompt"`
	New    int64 `json:"new"`
}

func (s GenerateSize) String() string { return fmt.Sprintf("%dx%d+%d", s.Batch, s.Prompt, s.New) }

// tokens is the cache's length at the last step (the last new token is never fed back).
func (s GenerateSize) tokens() int64 { return s.Prompt + s.New - 1 }

var generateSize = regexp.MustCompile(`^(\d+)x(\d+)\+(\d+)$`)

// ParseGenerateSize reads "BATCHxPROMPT+NEW".
func ParseGenerateSize(s string) (GenerateSize, error) {
	m := generateSize.FindStringSubmatch(s)
	if m == nil {
		return GenerateSize{}, fmt.Errorf("%q is not BATCHxPROMPT+NEW (e.g. 16x512+256)", s)
	}
	var v [3]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(m[i+1], 10, 64)
	}
	if v[0] <= 0 || v[1] <= 0 || v[2] <= 0 {
		return GenerateSize{}, fmt.Errorf("%q: batch, prompt and new tokens must be positive", s)
	}
	return GenerateSize{Batch: v[0], Prompt: v[1], New: v[2]}, nil
}

// GenerateModel is what one recorded generation says about its memory.
type GenerateModel struct {
	Recorded GenerateSize `json:"recorded"`
	Peak     int64        `json:"recorded_peak"`
	Weights  int64        `json:"weights"` // parameters and CUDA-graph pools at the peak
	// Fixed is what else stayed the same size from the first cached token on
	// (the cuBLAS workspace: 33 MiB that no tensor holds, made at the first
	// matmul); it does not grow with the batch.
	Fixed int64 `json:"fixed,omitempty"`
	// CacheToken is what one token of one sequence's cache held at the
	// peak, the copy made as the cache grows included.
	CacheToken int64 `json:"cache_bytes_per_token"`
	// NamedToken is the cache's own bytes per token from the agent's shapes (0 when not named).
	NamedToken int64 `json:"named_bytes_per_token,omitempty"`
	PerSeq     int64 `json:"per_sequence"` // what a sequence holds besides its cache at the peak
	// PromptToken is what a prompt token held beside the cache at the
	// largest moment outside the cache's growth (the prompt's forward pass),
	// 0 when that moment is the peak's own.
	PromptToken int64 `json:"prompt_bytes_per_token"`
}

// GenerateModelOf reads the model off a recorded generation's analysis.
func GenerateModelOf(r *Result, recorded GenerateSize) (*GenerateModel, error) {
	d := r.peakDevice()
	if d == nil {
		return nil, errors.New("the snapshot has no device with a trace")
	}
	kv := catBytes(d.Categories, CatKVCache)
	if kv <= 0 {
		return nil, errors.New("no KV cache at the peak: record generate() with the agent (it names the cache) " +
			"or with Python stacks (transformers' cache code allocates it)")
	}
	m := &GenerateModel{Recorded: recorded, Peak: d.Peak.Bytes,
		Weights: catBytes(d.Categories, CatParameter) + catBytes(d.Categories, CatGraphPool)}
	m.CacheToken = kv / (recorded.Batch * recorded.tokens())
	m.Fixed = fixedBeside(d)
	m.PerSeq = max(0, (m.Peak-m.Weights-m.Fixed-kv)/recorded.Batch)
	if d.KVCache != nil {
		m.NamedToken = d.KVCache.BytesPerToken
	}
	m.PromptToken = m.promptToken(d)
	return m, nil
}

// promptToken: the largest memory beside the weights and the cache over the
// timeline, when it came while the cache was no longer than the prompt's
// and exceeds the peak's own, per prompt token.
func (m *GenerateModel) promptToken(d *Device) int64 {
	tl := d.Timeline
	kvAt := slices.Index(tl.CategoryNames, CatKVCache)
	if kvAt < 0 {
		return 0
	}
	promptCache := m.Recorded.Batch * m.Recorded.Prompt * m.CacheToken
	var most int64
	for _, p := range tl.Points {
		if len(p.Categories) <= kvAt || p.Categories[kvAt] > promptCache+promptCache/10 {
			continue
		}
		most = max(most, p.Allocated-m.Weights-m.Fixed-p.Categories[kvAt])
	}
	if most <= m.PerSeq*m.Recorded.Batch {
		return 0
	}
	return most / (m.Recorded.Batch * m.Recorded.Prompt)
}

// fixedBeside is the least the "other" category (blocks that outlive their
// step) held at any moment once the cache held a token: what was made once,
// before the first token was cached, and kept.
func fixedBeside(d *Device) int64 {
	tl := d.Timeline
	kvAt, otherAt := slices.Index(tl.CategoryNames, CatKVCache), slices.Index(tl.CategoryNames, CatOther)
	if kvAt < 0 || otherAt < 0 {
		return 0
	}
	least := int64(-1)
	for _, p := range tl.Points {
		if len(p.Categories) <= max(kvAt, otherAt) || p.Categories[kvAt] == 0 {
			continue
		}
		if least < 0 || p.Categories[otherAt] < least {
			least = p.Categories[otherAt]
		}
	}
	return max(0, least)
}

// PeakAt predicts the allocated peak of a generation of size s.
func (m *GenerateModel) PeakAt(s GenerateSize) int64 {
	decode := s.Batch * (m.CacheToken*s.tokens() + m.PerSeq)
	prompt := s.Batch * s.Prompt * (m.CacheToken + m.PromptToken)
	return m.Weights + m.Fixed + max(decode, prompt)
}

// LargestBatch is the largest batch of s's lengths whose peak fits limit (0: none).
func (m *GenerateModel) LargestBatch(s GenerateSize, limit int64) int64 {
	base := m.Weights + m.Fixed
	one := m.PeakAt(GenerateSize{Batch: 1, Prompt: s.Prompt, New: s.New}) - base
	if one <= 0 || limit <= base {
		return 0
	}
	return (limit - base) / one
}
