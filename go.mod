module github.com/vramscope/vramscope

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/sourcegraph/jsonrpc2 v0.2.3
	go.lsp.dev/protocol v0.12.0
	go.lsp.dev/uri v0.3.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.3.4 // indirect
	go.lsp.dev/jsonrpc2 v0.10.0 // indirect
	go.lsp.dev/pkg v0.0.0-20210717090340-384b27a52fb2 // indirect
	go.uber.org/atomic v1.9.0 // indirect
	go.uber.org/multierr v1.8.0 // indirect
	go.uber.org/zap v1.21.0 // indirect
	golang.org/x/sys v0.32.0 // indirect
)
