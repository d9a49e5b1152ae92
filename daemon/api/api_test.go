package api

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/golden"
)

const docPath = "../../docs/api.md"

// TestDocMatchesContract regenerates docs/api.md and fails when the committed
// file differs (go test ./daemon/api -update rewrites it).
func TestDocMatchesContract(t *testing.T) {
	src, err := os.ReadFile("api.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Markdown(src)
	if err != nil {
		t.Fatal(err)
	}
	if *golden.Update {
		if err := os.WriteFile(docPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v (run go test ./daemon/api -update)", err)
	}
	if string(want) != got {
		t.Fatalf("%s is out of date with daemon/api/api.go: run go test ./daemon/api -update", docPath)
	}
	for _, m := range Methods {
		if !strings.Contains(got, "### "+m.Name+"\n") {
			t.Errorf("the doc has no section for %s", m.Name)
		}
	}
}

func TestMethodsAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	dirs := map[Direction]bool{ClientToDaemon: true, AgentToDaemon: true, DaemonToAgent: true, Notification: true, AgentNotice: true}
	for _, m := range Methods {
		if seen[m.Name] {
			t.Errorf("%s is listed twice", m.Name)
		}
		seen[m.Name] = true
		if !dirs[m.Dir] {
			t.Errorf("%s: unknown direction %q", m.Name, m.Dir)
		}
		if m.Doc == "" {
			t.Errorf("%s has no doc", m.Name)
		}
		notice := m.Dir == Notification || m.Dir == AgentNotice
		if notice != (m.Result == nil) {
			t.Errorf("%s: notifications, and only they, have no result", m.Name)
		}
		if m.Dir == Notification && !strings.HasPrefix(m.Name, "event.") {
			t.Errorf("%s: notifications to subscribers are named event.*", m.Name)
		}
	}
}

// TestPythonMirror checks that the Python agent's jupyter/vramscope/_api.py
// names exactly the methods of this contract, with the same API version.
func TestPythonMirror(t *testing.T) {
	b, err := os.ReadFile("../../jupyter/vramscope/_api.py")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^([A-Z_]+)\s*=\s*"([^"]*)"`)
	var py []string
	version := ""
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		if m[1] == "API_VERSION" {
			version = m[2]
			continue
		}
		py = append(py, m[2])
	}
	if version != Version {
		t.Errorf("_api.py API_VERSION = %q, Go says %q", version, Version)
	}
	var goNames []string
	for _, m := range Methods {
		goNames = append(goNames, m.Name)
	}
	sort.Strings(py)
	sort.Strings(goNames)
	if strings.Join(py, " ") != strings.Join(goNames, " ") {
		t.Errorf("_api.py and api.go disagree:\n python: %v\n go:     %v", py, goNames)
	}
}
