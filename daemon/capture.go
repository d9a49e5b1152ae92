package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/capture"
	"github.com/vramscope/vramscope/daemon/store"
)

// captureReq is one capture asked of an agent: by snapshot.take, or for one
// rank of a group.
type captureReq struct {
	label   string
	group   string // the group it belongs to ("" none)
	reason  string // "request" unless an OOM on another rank asked
	timeout time.Duration
}

// captured is a stored capture and when the agent read its allocator's state.
type captured struct {
	meta store.Meta
	at   time.Time
}

// capture asks agent a to dump its snapshot through a stream (or a file) and
// commits it: snapshot.take's work, shared with group captures.
func (d *Daemon) capture(ctx context.Context, a *agent, req captureReq) (captured, error) {
	start := time.Now()
	proc0 := a.process()
	pid := proc0.PID
	var nv store.Meta
	d.nvmlAt(&nv, pid, proc0.Device)
	d.podMeta(&nv, pid)
	part := d.store.NewIncoming(fmt.Sprintf("%d", pid))
	params := api.DumpParams{Path: part}
	st := capture.OpenStream(d.store, part)
	if st != nil {
		params.Stream = st.FIFO()
	}
	cctx, cancel := context.WithTimeout(ctx, req.timeout)
	defer cancel()
	var res api.DumpResult
	asked := time.Now()
	if err := a.s.rpc().Call(cctx, api.AgentDump, params, &res); err != nil {
		if st != nil {
			st.Close()
		}
		d.store.RemoveIncoming(part)
		if errors.Is(err, context.DeadlineExceeded) {
			return captured{}, fail(errAgentFailed, "process %d did not dump its snapshot within %s", pid, req.timeout)
		}
		return captured{}, fail(errAgentFailed, "process %d could not dump its snapshot: %v", pid, err)
	}
	at := capturedAt(asked, res)
	d.addLevels(a, res.Levels) // before the commit, whose analysis reads them
	proc := a.process()
	meta := store.Meta{Reason: req.reason, Source: firstArg(proc.Argv), PID: proc.PID, Host: proc.Host,
		Rank: proc.Rank, Entries: res.Entries, TookMS: res.TookMS, Label: req.label, Group: req.group,
		GPUBytes: nv.GPUBytes, OtherGPUBytes: nv.OtherGPUBytes, OtherPIDs: nv.OtherPIDs, Phases: store.Phases(res.Phases),
		PodUID: nv.PodUID, Pod: nv.Pod, Namespace: nv.Namespace, Container: nv.Container}
	meta.Device, meta.DeviceByNVML = a.nvmlOf(res.Device)
	answered := time.Now()
	if st != nil && res.Streamed {
		sr := st.Wait(cctx)
		if sr.Stopped {
			d.store.RemoveIncoming(part)
			return captured{}, fail(errAgentFailed, "process %d did not finish streaming its snapshot within %s: %v", pid, req.timeout, sr.Err)
		}
		finished := time.Now()
		meta.Phases.Finish = millis(finished.Sub(answered))
		m, err := d.commitStreamed(part, sr, meta)
		if err != nil {
			return captured{}, err
		}
		d.storeLevels(m)
		d.cfg.Logf("capture %s of pid %d (%d entries, %d bytes): %s = before %s, agent %s (snapshot %.1f ms, write %.1f ms), finish %s, commit %s",
			m.ID, m.PID, m.Entries, m.Bytes, ms(time.Since(start)), ms(asked.Sub(start)), ms(answered.Sub(asked)),
			res.Phases.Snapshot, res.Phases.Write, ms(finished.Sub(answered)), ms(time.Since(finished)))
		return captured{m, at}, nil
	}
	if st != nil {
		st.Close()
	}
	m, err := d.commit(part, part, meta)
	if err != nil {
		return captured{}, err
	}
	d.storeLevels(m)
	return captured{m, at}, nil
}

// capturedAt is when the agent read its allocator's state: its own clock
// when it says (the same host's), else the time it was asked plus the time it
// says it waited for a recording window.
func capturedAt(asked time.Time, res api.DumpResult) time.Time {
	if res.AtMS > 0 {
		return time.UnixMicro(int64(res.AtMS * 1000))
	}
	return asked.Add(time.Duration(res.Phases.Wait * float64(time.Millisecond)))
}
