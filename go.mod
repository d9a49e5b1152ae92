module github.com/vramscope/vramscope

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/sourcegraph/jsonrpc2 v0.2.3 // indirect
)
