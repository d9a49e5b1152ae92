// Command vramscope finds out why a PyTorch training run ran out of GPU memory
// or left the GPU idle. Each subcommand lives in its own file in internal/cli.
package main

import (
	"os"

	"github.com/vramscope/vramscope/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
