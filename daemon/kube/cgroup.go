// Package kube attributes a process on a Kubernetes node to its pod and
// container: the pod's UID and the container's ID from /proc/PID/cgroup
// (cgroup v1 and v2, the cgroupfs and systemd drivers, containerd, CRI-O and
// Docker), and the pod's name, namespace and container name from the
// kubelet's pod list where the daemon is allowed to read it. It uses the
// standard library only: the daemon needs two fields of one JSON document,
// not a Kubernetes client.
package kube

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Ref is what a process's cgroup says about it: empty fields when it runs
// in no pod (a login session, a plain Docker container has a ContainerID
// but no PodUID).
type Ref struct {
	PodUID      string // "0d5e3f5a-1c2b-4f3e-9a8b-7c6d5e4f3a2b"
	ContainerID string // the runtime's 64 hex digits
}

// InPod reports whether the process runs in a Kubernetes pod.
func (r Ref) InPod() bool { return r.PodUID != "" }

// A pod's cgroup is named after its UID: "pod<uid>" under the cgroupfs
// driver, "kubepods-<qos>-pod<uid>.slice" under systemd, which writes the
// UID's dashes as underscores (a dash separates a slice's parents). Static
// (mirror) pods have a 32-digit hash for a UID.
var podRE = regexp.MustCompile(`(?:^|-)pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})(?:\.slice)?$`)

// A container's cgroup is its ID, bare (cgroupfs) or in a systemd scope
// named by the runtime ("cri-containerd-<id>.scope", "crio-<id>.scope",
// "docker-<id>.scope"). CRI-O's "crio-conmon-<id>.scope" holds its monitor,
// not the container, and does not match.
var containerRE = regexp.MustCompile(`^(?:(?:cri-containerd|crio|docker|containerd)-)?([0-9a-f]{64})(?:\.scope)?$`)

// ParseCgroup reads the text of /proc/PID/cgroup. Under cgroup v1 each
// controller has a line ("4:memory:/kubepods/burstable/pod…/…"), under v2
// one line ("0::/kubepods.slice/…"); the first line that names a pod wins.
// The path may be relative to the reader's cgroup namespace ("/../../…"):
// only its components are read.
func ParseCgroup(r io.Reader) Ref {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	var docker Ref
	for sc.Scan() {
		_, path, ok := cutPath(sc.Text())
		if !ok {
			continue
		}
		ref := parsePath(path)
		if ref.InPod() {
			return ref
		}
		if docker.ContainerID == "" {
			docker = ref
		}
	}
	return docker
}

// cutPath splits "hierarchy-ID:controllers:path"; the path may contain
// colons, the first two fields may not.
func cutPath(line string) (string, string, bool) {
	id, rest, ok := strings.Cut(line, ":")
	if !ok {
		return "", "", false
	}
	ctl, path, ok := strings.Cut(rest, ":")
	return id + ":" + ctl, path, ok
}

func parsePath(path string) Ref {
	var ref Ref
	for _, c := range strings.Split(path, "/") {
		if m := podRE.FindStringSubmatch(c); m != nil {
			ref.PodUID = strings.ReplaceAll(m[1], "_", "-")
			ref.ContainerID = "" // a container is below its pod
			continue
		}
		if m := containerRE.FindStringSubmatch(c); m != nil {
			ref.ContainerID = m[1]
		}
	}
	return ref
}

// ReadCgroup parses /proc/PID/cgroup (readable by every user, hostPID or
// not: the daemon needs no capability for it).
func ReadCgroup(pid int) (Ref, error) {
	return readCgroupAt("/proc", pid)
}

func readCgroupAt(proc string, pid int) (Ref, error) {
	f, err := os.Open(fmt.Sprintf("%s/%d/cgroup", proc, pid))
	if err != nil {
		return Ref{}, err
	}
	defer f.Close()
	return ParseCgroup(io.LimitReader(f, 64<<10)), nil
}
