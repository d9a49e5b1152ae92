package profiler

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/internal/reftool"
)

const qualSource = `import torch

class Block(torch.nn.Module):
    """A block.

class NotAClass:  (inside the docstring)
"""
    def __init__(self, n,
dim=3):  # a continuation line at column 0 closes nothing
        super().__init__()

    def forward(self, x):
        def helper(y):
            return y
        return helper(x)

    class Inner:
        async def forward(self, x):
            return x

def forward(x):
    return x
`

func TestQualnames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.py")
	if err := os.WriteFile(path, []byte(qualSource), 0o644); err != nil {
		t.Fatal(err)
	}
	var q Qualnames
	for _, c := range []struct {
		line int
		fn   string
		want string
	}{
		{10, "__init__", "Block.__init__"},
		{15, "forward", "Block.forward"},
		{14, "helper", ""}, // a local function is no method
		{19, "forward", "Block.Inner.forward"},
		{22, "forward", ""}, // module level
		{15, "backward", ""},
	} {
		if got := q.Of(path, c.line, c.fn); got != c.want {
			t.Errorf("line %d %s: %q, want %q", c.line, c.fn, got, c.want)
		}
	}
	if got := q.Of(filepath.Join(t.TempDir(), "gone.py"), 3, "forward"); got != "" {
		t.Errorf("a missing file: %q, want the bare name", got)
	}
	other := filepath.Join(t.TempDir(), "model.txt")
	if err := os.WriteFile(other, []byte(qualSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := q.Of(other, 15, "forward"); got != "" {
		t.Errorf("a file that is not Python source was read: %q", got)
	}
	if dir := t.TempDir() + "/pkg.py"; os.Mkdir(dir, 0o755) == nil && q.Of(dir, 1, "forward") != "" {
		t.Error("a directory was read")
	}
}

// A real library file, long docstrings and all: Python's own json decoder,
// whose methods are listed by hand from the file.
func TestQualnamesRealSource(t *testing.T) {
	files, _ := filepath.Glob("/usr/lib/python3*/json/decoder.py")
	if len(files) == 0 {
		reftool.Missing(t, "no Python standard library at /usr/lib/python3*")
	}
	src, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range ParsePythonDefs(src) {
		if d.classes != "" {
			got[d.classes+"."+d.name] = true
		}
	}
	want := []string{"JSONDecodeError.__init__", "JSONDecodeError.__reduce__",
		"JSONDecoder.__init__", "JSONDecoder.decode", "JSONDecoder.raw_decode"}
	for _, want := range want {
		if !got[want] {
			t.Errorf("%s not found in %s (found %v)", want, files[0], got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("methods found: %v, want %v (module-level functions are no methods)", got, want)
	}
}
