// Command vramscope finds out why a PyTorch training run ran out of GPU memory
// or left the GPU idle. Each subcommand lives in its own file in cli/, this
// folder's front end (mcp/ beside it serves the Model Context Protocol); the
// layers under it are drawn in docs/architecture.md.
package main

import (
	"os"

	"github.com/vramscope/vramscope/cmd/vramscope/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
