package daemon

import (
	"encoding/json"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/capture"
	"github.com/vramscope/vramscope/daemon/store"
)

// wireSnapshot converts the store's on-disk record into the wire's: the two
// are separate types so that either can change without the other. A field
// added to store.Meta is not on the wire until it is added here (and to
// api.Snapshot); TestWireSnapshotCarriesEveryField says when one is missed.
func wireSnapshot(m store.Meta) api.Snapshot {
	return api.Snapshot{
		ID: m.ID, Created: m.Created, Bytes: m.Bytes, SHA256: m.SHA256, Reason: m.Reason,
		Source: m.Source, PID: m.PID, Host: m.Host, Rank: m.Rank, Device: m.Device,
		Entries: m.Entries, Format: m.Format, TookMS: m.TookMS, Phases: api.Phases(m.Phases), Label: m.Label, Group: m.Group, DeviceByNVML: m.DeviceByNVML,
		GPUBytes: m.GPUBytes, OtherGPUBytes: m.OtherGPUBytes, OtherPIDs: m.OtherPIDs,
		PodUID: m.PodUID, Pod: m.Pod, Namespace: m.Namespace, Container: m.Container,
	}
}

// snapshotResult is m on the wire with its file and, once the daemon has
// analysed it, its peak and OOMs (capture.ListCache).
func (d *Daemon) snapshotResult(m store.Meta) api.SnapshotResult {
	res := api.SnapshotResult{Snapshot: wireSnapshot(m), Path: d.store.Path(m.ID)}
	var f capture.ListFacts
	if b, err := d.store.ReadCache(m.ID, capture.ListCache); err == nil && json.Unmarshal(b, &f) == nil {
		res.PeakBytes, res.OOMs = max(0, f.PeakBytes), max(0, f.OOMs)
	}
	return res
}
