package daemon

import "github.com/vramscope/vramscope/daemon/api"

// onStepLevels is called with a process's new step levels whenever they
// arrive (agent.levels, or with a snapshot), in step order within one call,
// after they are kept; capBytes is the memory the process may use (its
// memory-fraction cap, else its device's total; 0 unknown). It runs on the
// agent's request goroutine: it must be quick and must not block. The
// projection of when the cap fills (memory.warning) hooks in here.
func (d *Daemon) onStepLevels(pid int, levels []api.StepLevel, capBytes int64) {}
