package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	uid1 = "0d5e3f5a-1c2b-4f3e-9a8b-7c6d5e4f3a2b"
	cid1 = "3c7e1f0d9b2a48c6e5f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9"
)

// TestParseCgroup reads /proc/PID/cgroup as each cgroup version, driver
// and runtime writes it (testdata/*.cgroup).
func TestParseCgroup(t *testing.T) {
	want := map[string]Ref{
		"v1_cgroupfs_docker":     {uid1, cid1}, // cgroup v1, cgroupfs driver: /kubepods/burstable/pod<uid>/<id>
		"v1_systemd_containerd":  {uid1, cid1}, // cgroup v1, systemd driver: the UID's dashes as underscores
		"v2_systemd_containerd":  {uid1, cid1}, // cgroup v2: one "0::" line
		"v2_cgroupfs_guaranteed": {uid1, cid1}, // a Guaranteed pod has no QoS level (k3s's layout)
		"v2_crio_guaranteed":     {uid1, cid1},
		"v2_crio_conmon":         {uid1, ""},   // CRI-O's monitor: in the pod, in no container
		"v2_cgroupns_relative":   {uid1, cid1}, // read from inside a cgroup namespace: "/../../…"
		"v2_static_pod":          {"6e5c4a3b2d1f0e9d8c7b6a5f4e3d2c1b", cid1},
		"v2_login_session":       {},
		"v2_docker_no_pod":       {"", cid1},
	}
	files, _ := filepath.Glob("testdata/*.cgroup")
	if len(files) != len(want) {
		t.Errorf("%d fixtures, %d expectations", len(files), len(want))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".cgroup")
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		got := ParseCgroup(r)
		r.Close()
		if w, ok := want[name]; !ok || got != w {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
}

func TestParseCgroupNoise(t *testing.T) {
	for _, s := range []string{"", "garbage", "0:", "\x00\xff", "0::/kubepods/podnot-a-uid/xyz", strings.Repeat("a", 100<<10)} {
		if got := ParseCgroup(strings.NewReader(s)); got != (Ref{}) {
			t.Errorf("%.20q: %+v", s, got)
		}
	}
}

// TestReadCgroup reads a real /proc entry: this process's own, in whatever
// cgroup the test runs (a pod in CI on Kubernetes, a session elsewhere).
func TestReadCgroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/cgroup"); err != nil {
		t.Skip("no /proc here")
	}
	if _, err := ReadCgroup(os.Getpid()); err != nil {
		t.Error(err)
	}
	if _, err := ReadCgroup(1 << 30); err == nil {
		t.Error("a pid that cannot exist read without error")
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "42"), 0o755)
	src, _ := os.ReadFile("testdata/v2_systemd_containerd.cgroup")
	os.WriteFile(filepath.Join(dir, "42", "cgroup"), src, 0o644)
	if r, err := readCgroupAt(dir, 42); err != nil || r != (Ref{uid1, cid1}) {
		t.Errorf("%+v %v", r, err)
	}
}
