package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/vramscope/vramscope/daemon/kube"
	"github.com/vramscope/vramscope/daemon/store"
)

// newPods makes the pod-name cache: names from the kubelet when cfg says
// where it is, UIDs and container IDs from cgroups always.
func newPods(cfg Config) (*kube.Resolver, error) {
	if cfg.Kube.KubeletURL == "" {
		return kube.NewResolver(nil, cfg.Logf), nil
	}
	k, err := kube.NewKubelet(cfg.Kube.KubeletURL, cfg.Kube.TokenFile, cfg.Kube.CAFile, cfg.Kube.Insecure)
	if err != nil {
		return nil, err
	}
	r := kube.NewResolver(k, cfg.Logf)
	go func() { // names ready before the first agent, when the kubelet answers
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Refresh(ctx)
	}()
	return r, nil
}

// podRef reads the pod and container of a process from its cgroup; a
// process outside any pod (or one that is gone) has none.
func (d *Daemon) podRef(pid int) kube.Ref {
	read := d.cfg.Kube.ReadCgroup
	if read == nil {
		read = kube.ReadCgroup
	}
	ref, err := read(pid)
	if err != nil {
		return kube.Ref{}
	}
	d.pods.Attribute(ref) // a new pod: start fetching its name now
	return ref
}

// pod is the agent's pod and container with the names known so far.
func (d *Daemon) pod(a *agent) kube.Attribution { return d.pods.Attribute(a.ref) }

// podMeta records the pod of the process pid in a snapshot's metadata.
func (d *Daemon) podMeta(meta *store.Meta, pid int) {
	a := d.agents.get(pid)
	if a == nil || !a.ref.InPod() {
		return
	}
	p := d.pod(a)
	meta.PodUID, meta.Pod, meta.Namespace, meta.Container = p.PodUID, p.Pod, p.Namespace, p.Container
}

// where says, for the log, where an agent runs when that is not obvious.
func (a *agent) where() string {
	s := ""
	if a.nsPID != 0 {
		s += fmt.Sprintf(", pid %d in its container", a.nsPID)
	}
	if a.ref.InPod() {
		s += ", pod " + a.ref.PodUID
	}
	return s
}
