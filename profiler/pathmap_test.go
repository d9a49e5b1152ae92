package profiler

import (
	"os"
	"path/filepath"
	"testing"
)

func touch(t *testing.T, root string, rel ...string) {
	t.Helper()
	for _, r := range rel {
		p := filepath.Join(root, filepath.FromSlash(r))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("# test\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPathMapRule(t *testing.T) {
	dir := t.TempDir()
	var m PathMap
	if err := m.AddRule("/workspace/trainer=" + dir); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/workspace/trainer/train_gpt2.py":       dir + "/train_gpt2.py",
		"/workspace/trainer/sub/x.py":            dir + "/sub/x.py",
		"/workspace/trainer":                     dir,
		"/workspace/trainer2/train.py":           "/workspace/trainer2/train.py", // not a path prefix
		"/workspace/other/train_gpt2.py":         "/workspace/other/train_gpt2.py",
		"/usr/local/lib/python3.12/os.py":        "/usr/local/lib/python3.12/os.py",
		"":                                       "",
		"relative/workspace/trainer/train_gp.py": "relative/workspace/trainer/train_gp.py",
	} {
		if got := m.Map(in); got != want {
			t.Errorf("Map(%q) = %q, want %q", in, got, want)
		}
	}
	// Trailing slashes in either half do not matter.
	var m2 PathMap
	if err := m2.AddRule("/workspace/trainer/=" + dir + "/"); err != nil {
		t.Fatal(err)
	}
	if got := m2.Map("/workspace/trainer/a.py"); got != dir+"/a.py" {
		t.Errorf("with trailing slashes: %q", got)
	}
	for _, bad := range []string{"nope", "=x", "x=", ""} {
		if err := (&PathMap{}).AddRule(bad); err == nil {
			t.Errorf("AddRule(%q): no error", bad)
		}
	}
}

func TestPathMapNil(t *testing.T) {
	var m *PathMap
	if got := m.Map("/workspace/a.py"); got != "/workspace/a.py" {
		t.Errorf("nil map changed a name: %q", got)
	}
}

func TestPathMapSuffix(t *testing.T) {
	root := t.TempDir()
	// Walk order puts the worse candidate first.
	touch(t, root, "a/other/train_gpt2.py", "b/trainer/train_gpt2.py", "c/workspace/trainer/train_lora.py",
		"d/trainer/train_lora.py", "e/only_here.py")
	var m PathMap
	if err := m.AddRoot(root); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/workspace/trainer/train_gpt2.py": filepath.Join(root, "b/trainer/train_gpt2.py"),
		"/workspace/trainer/train_lora.py": filepath.Join(root, "c/workspace/trainer/train_lora.py"),
		"/elsewhere/only_here.py":          filepath.Join(root, "e/only_here.py"),
		"/workspace/trainer/missing.py":    "/workspace/trainer/missing.py",
		"/workspace/trainer/train_gpt2.c":  "/workspace/trainer/train_gpt2.c",
	} {
		if got := m.Map(in); got != want {
			t.Errorf("Map(%q) = %q, want %q", in, got, want)
		}
		if got := m.Map(in); got != want {
			t.Errorf("second Map(%q) = %q, want %q", in, got, want)
		}
	}
}

// Rules come before suffix matching; a name that exists locally stays.
func TestPathMapPrecedence(t *testing.T) {
	root, ruleDir := t.TempDir(), t.TempDir()
	touch(t, root, "trainer/train_gpt2.py", "proj/existing.py")
	var m PathMap
	if err := m.AddRoot(root); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(t.TempDir(), "existing.py")
	touch(t, filepath.Dir(existing), "existing.py")
	if got := m.Map(existing); got != existing {
		t.Errorf("an existing local file was mapped to %q", got)
	}
	if got := m.Map("/workspace/trainer/train_gpt2.py"); got != filepath.Join(root, "trainer/train_gpt2.py") {
		t.Errorf("suffix match: %q", got)
	}
	if err := m.AddRule("/workspace/trainer=" + ruleDir); err != nil {
		t.Fatal(err)
	}
	if got := m.Map("/workspace/trainer/train_gpt2.py"); got != ruleDir+"/train_gpt2.py" {
		t.Errorf("a rule added later must win over (and invalidate) the suffix match: %q", got)
	}
}

// Hidden folders, __pycache__ and node_modules are not searched.
func TestPathMapSkipsJunk(t *testing.T) {
	root := t.TempDir()
	touch(t, root, ".venv/trainer/train_gpt2.py", "__pycache__/trainer/train_lora.py",
		"node_modules/trainer/oom_batch.py")
	var m PathMap
	if err := m.AddRoot(root); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"/workspace/trainer/train_gpt2.py", "/workspace/trainer/train_lora.py", "/workspace/trainer/oom_batch.py"} {
		if got := m.Map(in); got != in {
			t.Errorf("Map(%q) = %q from a skipped folder", in, got)
		}
	}
}

// Only the base name in common is not a match for an installed library's file:
// a project's own functional.py or a vendored modeling_llama.py is not
// torch/nn/functional.py or transformers' modeling_llama.py, and showing
// library frames at the user's lines points at the wrong code.
func TestPathMapDoesNotMapLibrariesByBaseName(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "mymodel/functional.py", "mymodel/modeling_llama.py", "venv/lib/python3.12/site-packages/torch/nn/modules/module.py")
	var m PathMap
	if err := m.AddRoot(root); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		"/usr/local/lib/python3.12/site-packages/torch/nn/functional.py",
		"/usr/local/lib/python3.12/site-packages/transformers/models/llama/modeling_llama.py",
	} {
		if got := m.Map(in); got != in {
			t.Errorf("Map(%q) = %q: only the base name matches", in, got)
		}
	}
	// A local copy of the same library is a real match.
	in := "/usr/local/lib/python3.12/site-packages/torch/nn/modules/module.py"
	if got, want := m.Map(in), filepath.Join(root, "venv/lib/python3.12/site-packages/torch/nn/modules/module.py"); got != want {
		t.Errorf("Map(%q) = %q, want %q", in, got, want)
	}
}

// A root that does not exist (a typo on the command line) is an error, not a
// silent no-op that leaves every recorded path unmapped.
func TestPathMapMissingRoot(t *testing.T) {
	var m PathMap
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	if err := m.AddRoot(missing); err == nil {
		t.Errorf("AddRoot(%q): no error", missing)
	}
	file := filepath.Join(t.TempDir(), "train.py")
	touch(t, filepath.Dir(file), "train.py")
	if err := m.AddRoot(file); err == nil {
		t.Errorf("AddRoot(%q) of a file: no error", file)
	}
}
