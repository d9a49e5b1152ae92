package profiler

// NamedTensor is a CUDA tensor storage that the agent named when the
// snapshot was taken (jupyter/vramscope/agent/_tensors.py): what the tensor is, as
// opposed to where it was allocated. Addr is the storage's data pointer,
// which is the address of its allocator block.
type NamedTensor struct {
	Device int    `json:"device"`
	Addr   uint64 `json:"addr"`
	Bytes  int64  `json:"bytes"`
	// Kind: parameter, buffer, gradient, optimizer_state, kv_cache, attribute, global, local, activation.
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Module string `json:"module,omitempty"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	// Shape is the shape of the tensor that named the storage ([batch, heads,
	// seq, head_dim] for a kv_cache entry); agents before it sent none.
	Shape []int64 `json:"shape,omitempty"`
}

// TensorNames is the agent's walk over the tensors Python could see: what it
// named, how long it took, and whether it stopped early.
type TensorNames struct {
	Entries   []NamedTensor
	TookMS    float64
	Truncated bool
	Objects   int64  // garbage-collector objects looked at
	Error     string // why the walk stopped, if it failed
	// Methods are the forward methods of the module classes the walk met:
	// where their code is and their qualified names (Qualnames.Seed).
	Methods []Method
	// MemoryCaps are the per-process caps (torch.cuda.set_per_process_memory_fraction)
	// in bytes by device, where one was set, read when the snapshot was taken.
	MemoryCaps map[int]int64
}

// Method is a function's code location and qualified name as Python knows
// it: "GPT2Attention.forward" in lines First..Last of File (as recorded),
// with the module paths of the instances whose forward it is, layers read
// as "*" ("model.transformer.h.*.attn").
type Method struct {
	File        string
	First, Last int
	Qual        string
	Modules     []string
}
