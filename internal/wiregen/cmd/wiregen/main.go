// Command wiregen writes the files generated from the daemon's API contract
// (daemon/api) and the language server's commands (lsp/command):
// jupyter/vramscope/_api.py, vscode-ext/src/api.ts, vscode-ext/src/commands_gen.ts
// and docs/api.md. `make generate` runs it through go generate.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vramscope/vramscope/internal/wiregen"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	files, err := wiregen.Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wiregen:", err)
		os.Exit(1)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(*root, f.Path), f.Data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "wiregen:", err)
			os.Exit(1)
		}
	}
}
