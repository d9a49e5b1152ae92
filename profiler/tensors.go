package profiler

// NamedTensor is a CUDA tensor storage that the agent named when the
// snapshot was taken (jupyter/vramscope/_tensors.py): what the tensor is, as
// opposed to where it was allocated. Addr is the storage's data pointer,
// which is the address of its allocator block.
type NamedTensor struct {
	Device int    `json:"device"`
	Addr   uint64 `json:"addr"`
	Bytes  int64  `json:"bytes"`
	Kind   string `json:"kind"` // parameter, buffer, gradient, optimizer_state, attribute, local, activation
	Name   string `json:"name"`
	Module string `json:"module,omitempty"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
}

// TensorNames is the agent's walk over the tensors Python could see: what it
// named, how long it took, and whether it stopped early.
type TensorNames struct {
	Entries   []NamedTensor
	TookMS    float64
	Truncated bool
	Objects   int64  // garbage-collector objects looked at
	Error     string // why the walk stopped, if it failed
}
