package kube

import (
	"context"
	"sync"
	"time"
)

// Attribution is a process's pod and container as far as they are known:
// the UID and container ID from its cgroup, the names from the kubelet.
type Attribution struct {
	PodUID      string
	ContainerID string
	Pod         string
	Namespace   string
	Container   string
}

// Resolver names pods from the kubelet's list, cached. Lookups never wait
// for the kubelet: a process's names appear once a refresh has them (one is
// started by a miss, at most every MinRefresh), so a slow or refusing
// kubelet never holds an agent's registration or a scrape.
type Resolver struct {
	Kubelet    *Kubelet // nil: names are never known, UIDs still are
	MinRefresh time.Duration
	Logf       func(format string, args ...any)

	mu      sync.Mutex
	pods    map[string]Pod // by UID
	tried   time.Time
	running bool
	lastErr string
}

// NewResolver caches k's pod list (k may be nil).
func NewResolver(k *Kubelet, logf func(string, ...any)) *Resolver {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Resolver{Kubelet: k, MinRefresh: 5 * time.Second, Logf: logf, pods: map[string]Pod{}}
}

// Attribute adds the names the cache has to ref.
func (r *Resolver) Attribute(ref Ref) Attribution {
	a := Attribution{PodUID: ref.PodUID, ContainerID: ref.ContainerID}
	if !ref.InPod() || r == nil || r.Kubelet == nil {
		return a
	}
	r.mu.Lock()
	p, ok := r.pods[ref.PodUID]
	r.mu.Unlock()
	if !ok || (ref.ContainerID != "" && p.Containers[ref.ContainerID] == "") {
		r.refreshSoon() // a new pod, or a container restarted under a new ID
	}
	if ok {
		a.Pod, a.Namespace, a.Container = p.Name, p.Namespace, p.Containers[ref.ContainerID]
	}
	return a
}

// refreshSoon starts one background refresh unless one runs or ran within
// MinRefresh.
func (r *Resolver) refreshSoon() {
	r.mu.Lock()
	if r.running || time.Since(r.tried) < r.MinRefresh {
		r.mu.Unlock()
		return
	}
	r.running = true
	r.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Refresh(ctx)
	}()
}

// Refresh fetches the pod list now. A failure keeps the names already
// known and is logged once per distinct error.
func (r *Resolver) Refresh(ctx context.Context) error {
	r.mu.Lock()
	r.running, r.tried = true, time.Now()
	r.mu.Unlock()
	pods, err := r.Kubelet.Pods(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = false
	if err != nil {
		if err.Error() != r.lastErr {
			r.Logf("pod names unknown: %v", err)
		}
		r.lastErr = err.Error()
		return err
	}
	r.lastErr = ""
	r.pods = make(map[string]Pod, len(pods))
	for _, p := range pods {
		r.pods[p.UID] = p
	}
	return nil
}
