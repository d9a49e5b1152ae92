package export

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/vramscope/vramscope/daemon/store"
	"github.com/vramscope/vramscope/profiler/pprofenc"
)

// profileSlots bounds the profiles built at once: the first request for a
// snapshot decodes it (a second and ~100 MB for a 1M-entry trace).
var profileSlots = make(chan struct{}, 2)

// gpuMemoryProfile answers GET /debug/pprof/gpu_memory with the latest
// stored snapshot that matches the query (pid, rank, pod, namespace, id; all
// given must match) as a gzipped pprof profile whose default sample type,
// inuse_space, is the memory live at the snapshot's peak. go tool pprof,
// Parca and Pyroscope read it as they read a Go heap profile.
func (src Sources) gpuMemoryProfile(w http.ResponseWriter, r *http.Request) {
	match, err := snapshotFilter(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var meta *store.Meta
	for _, m := range src.Snapshots() { // newest first
		if match(m) {
			meta = &m
			break
		}
	}
	if meta == nil {
		http.Error(w, "no stored snapshot matches "+describeQuery(r.URL.Query())+" (take one: vramscope snap PID)", http.StatusNotFound)
		return
	}
	select {
	case profileSlots <- struct{}{}:
		defer func() { <-profileSlots }()
	case <-r.Context().Done():
		return
	}
	res, err := src.Analysis(meta.ID)
	if err != nil {
		http.Error(w, fmt.Sprintf("snapshot %s: %v", meta.ID, err), http.StatusInternalServerError)
		return
	}
	p := pprofenc.Build(res)
	p.Comments = append(p.Comments, fmt.Sprintf("snapshot %s (%s) of pid %d, rank %d, device %d", meta.ID, meta.Reason, meta.PID, meta.Rank, meta.Device))
	if meta.Pod != "" || meta.PodUID != "" {
		p.Comments = append(p.Comments, fmt.Sprintf("pod %s/%s (uid %s), container %s", meta.Namespace, meta.Pod, meta.PodUID, meta.Container))
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		http.Error(w, fmt.Sprintf("snapshot %s: %v", meta.ID, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", "gpu_memory-"+meta.ID+".pb.gz"))
	w.Header().Set("X-Vramscope-Snapshot", meta.ID)
	w.Write(buf.Bytes())
}

// snapshotFilter turns the query into a predicate on snapshot metadata;
// parameters it does not know (pprof tools add "seconds") are ignored.
func snapshotFilter(q url.Values) (func(store.Meta) bool, error) {
	num := func(name string) (int, bool, error) {
		s := q.Get(name)
		if s == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, false, fmt.Errorf("%s=%q: want an integer", name, s)
		}
		return n, true, nil
	}
	pid, byPID, err := num("pid")
	if err != nil {
		return nil, err
	}
	rank, byRank, err := num("rank")
	if err != nil {
		return nil, err
	}
	id, pod, ns := q.Get("id"), q.Get("pod"), q.Get("namespace")
	return func(m store.Meta) bool {
		return (!byPID || m.PID == pid) && (!byRank || m.Rank == rank) && (id == "" || m.ID == id) &&
			(pod == "" || m.Pod == pod || m.PodUID == pod) && (ns == "" || m.Namespace == ns)
	}, nil
}

func describeQuery(q url.Values) string {
	s := ""
	for _, k := range []string{"id", "pid", "rank", "pod", "namespace"} {
		if v := q.Get(k); v != "" {
			s += fmt.Sprintf(" %s=%q", k, v)
		}
	}
	if s == "" {
		return "(any)"
	}
	return s[1:]
}
