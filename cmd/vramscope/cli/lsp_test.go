package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/cmd/vramscope/cli"
)

// TestLSPFramingError runs `vramscope lsp` (this test binary, run again as
// the command) on input that breaks the base protocol: it says on stderr what
// was wrong and exits 1. It used to exit 0 without a word. Input that ends
// between messages is a normal end (exit 0).
func TestLSPFramingError(t *testing.T) {
	if os.Getenv("VRAMSCOPE_TEST_LSP") == "1" {
		os.Exit(cli.Main([]string{"lsp", "--daemon", "off"}, os.Stdout, os.Stderr))
	}
	for input, want := range map[string]string{
		"Content-Length: 999999999999\r\n\r\n{}": "exceeds the limit",
		strings.Repeat("X", 100_000):             "a header line longer than 4096 bytes",
		"Content-Length: 10\r\n\r\n{\"a\"":       "the input ends 4 bytes into a message of 10",
		"Content-Length: 2\r\n\r\n{}":            "not a JSON-RPC message",
		"":                                       "",
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLSPFramingError$")
		cmd.Env = append(os.Environ(), "VRAMSCOPE_TEST_LSP=1")
		cmd.Stdin = strings.NewReader(input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if want == "" {
			if code != 0 {
				t.Errorf("empty input: exit %d, stderr %s", code, stderr.String())
			}
			continue
		}
		if code != 1 || !strings.Contains(stderr.String(), "vramscope: reading from the editor: ") || !strings.Contains(stderr.String(), want) {
			t.Errorf("input %.40q: exit %d, stderr %q; want exit 1 and %q", input, code, stderr.String(), want)
		}
	}
}
