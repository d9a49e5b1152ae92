package wiregen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/internal/golden"
	"github.com/vramscope/vramscope/lsp/command"
)

const root = "../.."

// TestGeneratedFilesAreFresh regenerates every file in memory and fails when
// the committed one differs (make generate, or go test -update here, rewrites them).
func TestGeneratedFilesAreFresh(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		path := filepath.Join(root, f.Path)
		if *golden.Update {
			if err := os.WriteFile(path, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		have, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (run make generate)", err)
			continue
		}
		if !bytes.Equal(have, f.Data) {
			t.Errorf("%s is stale: daemon/api, lsp/command or an engine type they carry changed since it was generated; run make generate", f.Path)
		}
	}
}

// TestEveryMethodCodeAndTypeIsGenerated checks each output names every
// method, every error code and every wire type, and carries the header that
// marks it generated.
func TestEveryMethodCodeAndTypeIsGenerated(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Path] = string(f.Data)
	}
	for _, p := range []string{PythonPath, TypeScriptPath} {
		if !strings.Contains(out[p], "DO NOT EDIT") {
			t.Errorf("%s lacks the DO NOT EDIT header", p)
		}
		for _, name := range []string{"RegisterParams", "DumpResult", "SnapshotResult", "Snapshot", "Phases"} {
			if !strings.Contains(out[p], "class "+name+"(") && !strings.Contains(out[p], "interface "+name+" ") {
				t.Errorf("%s does not declare %s", p, name)
			}
		}
		// A type that embeds another extends it, declared after it (Python
		// evaluates a class's bases when it is defined).
		for _, decl := range [][2]string{{"class _SnapshotResultRequired(Snapshot):", "class Snapshot(_SnapshotRequired, total=False):"},
			{"export interface SnapshotResult extends Snapshot {", "export interface Snapshot {"}} {
			child, parent := strings.Index(out[p], decl[0]), strings.Index(out[p], decl[1])
			if strings.HasPrefix(decl[0], "class") != (p == PythonPath) {
				continue
			}
			if child < 0 || parent < 0 || parent > child {
				t.Errorf("%s: %q at %d, its base %q at %d", p, decl[0], child, decl[1], parent)
			}
		}
	}
	if !strings.Contains(out[PythonPath], "\nCODE_TOO_LARGE = -32009  #") || !strings.Contains(out[TypeScriptPath], "  TooLarge: -32009,\n") {
		t.Error("the error code -32009 (CodeTooLarge) is missing")
	}
	for _, m := range api.Methods {
		for _, p := range []string{PythonPath, TypeScriptPath, MarkdownPath} {
			if !strings.Contains(out[p], `"`+m.Name+`"`) && !strings.Contains(out[p], "### "+m.Name+"\n") {
				t.Errorf("%s does not name the method %s", p, m.Name)
			}
		}
	}
	if !strings.Contains(out[PythonPath], "\nCODE_METHOD_NOT_FOUND = -32601  #") {
		t.Errorf("%s lacks CODE_METHOD_NOT_FOUND", PythonPath)
	}
}

// TestEveryPayloadIsTyped checks that no payload is left untyped: every
// engine type the daemon's methods carry (analyze.Site, flame.Node, the
// counter samples) is spelled out in both languages, every command of the
// language server is in commands_gen.ts with its argument and result types,
// and the only untyped member left is a JSON-RPC id (a number or a string).
func TestEveryPayloadIsTyped(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Path] = string(f.Data)
	}
	for _, name := range []string{"Site", "Node", "Finding", "Timeline", "Tree", "Diff", "DeviceSample", "ProcessSample", "Phase", "Report", "Ranks", "WhatIf"} {
		if !strings.Contains(out[TypeScriptPath], "export interface "+name+" ") {
			t.Errorf("%s does not declare %s", TypeScriptPath, name)
		}
		if !strings.Contains(out[PythonPath], "class "+name+"(") && !strings.Contains(out[PythonPath], "\n"+name+" = TypedDict(") {
			t.Errorf("%s does not declare %s", PythonPath, name)
		}
	}
	if n := strings.Count(out[TypeScriptPath], ": unknown"); n != 1 || !strings.Contains(out[TypeScriptPath], "  id: unknown;") {
		t.Errorf("%s: %d members typed unknown, want 1 (CancelParams.id)", TypeScriptPath, n)
	}
	if n := strings.Count(out[PythonPath], ": Any"); n != 1 {
		t.Errorf("%s: %d members typed Any, want 1 (CancelParams.id)", PythonPath, n)
	}
	if strings.Contains(out[CommandsPath], "unknown") {
		t.Errorf("%s has an untyped member", CommandsPath)
	}
	for _, cmd := range append(append([]command.Command(nil), command.Commands...), command.Requests...) {
		if !strings.Contains(out[CommandsPath], fmt.Sprintf("  %q: { ", cmd.Name)) {
			t.Errorf("%s does not type %s", CommandsPath, cmd.Name)
		}
	}
	// Optional (omitempty) keys are optional; the others are required.
	for _, want := range []string{"  token?: string;", "  client: string;"} {
		if !strings.Contains(out[TypeScriptPath], want) {
			t.Errorf("%s lacks %q", TypeScriptPath, want)
		}
	}
}

// TestSnakeCase pins the Python names the agent imports.
func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"AgentRegister": "AGENT_REGISTER", "EventOOMCaptured": "EVENT_OOM_CAPTURED",
		"AnalysisWhatIf": "ANALYSIS_WHAT_IF", "Hello": "HELLO", "MaxHelloBytes": "MAX_HELLO_BYTES",
		"CodeMethodNotFound": "CODE_METHOD_NOT_FOUND", "SHA256": "SHA256",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStaleSourceIsCaught feeds the generator a contract whose comment
// changed and checks the output changes: the freshness test can fail.
func TestStaleSourceIsCaught(t *testing.T) {
	srcs, err := readSources(root, SourceDir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := parseContract(srcs)
	if err != nil {
		t.Fatal(err)
	}
	changed := append([]source(nil), srcs...)
	for i, s := range changed {
		changed[i].Data = bytes.Replace(s.Data, []byte("// incompatible API major version"), []byte("// a changed comment"), 1)
	}
	b, err := parseContract(changed)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*contract{a, b} {
		if err := c.readComments(root); err != nil {
			t.Fatal(err)
		}
	}
	pa, _ := a.python()
	pb, _ := b.python()
	if pa == pb || a.typeScript() == b.typeScript() || a.markdown() == b.markdown() {
		t.Error("a changed comment in the contract did not change the generated files")
	}
}
