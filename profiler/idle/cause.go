package idle

// Kind is one cause of idle GPU time.
type Kind string

// The causes, as the report names them.
const (
	CauseDataLoader Kind = "data_loader" // the main thread fetched or waited for a batch
	CauseSync       Kind = "sync"        // a host-device sync drained the GPU's queue
	CauseCopy       Kind = "copy"        // a blocking host-to-device copy
	CauseCheckpoint Kind = "checkpoint"  // saving a checkpoint on the training thread
	CauseLogging    Kind = "logging"     // logging or printing
	CauseCollective Kind = "collective"  // waiting on other ranks
	CausePython     Kind = "python"      // Python-side work on the training thread
	CauseNoSamples  Kind = "no_samples"  // idle while the agent had no sample of the thread
)

// kindOf is the cause a sample's wait points to.
func kindOf(w Wait) Kind {
	switch w {
	case WaitDataLoader, WaitWorkers:
		return CauseDataLoader
	case WaitSync:
		return CauseSync
	case WaitCopy:
		return CauseCopy
	case WaitCheckpoint:
		return CauseCheckpoint
	case WaitLogging:
		return CauseLogging
	case WaitCollective:
		return CauseCollective
	}
	return CausePython
}

// titles say each cause in the user's words.
var titles = map[Kind]string{
	CauseDataLoader: "waiting for the data loader",
	CauseSync:       "host-device sync",
	CauseCopy:       "blocking host-to-device copy",
	CauseCheckpoint: "checkpoint save on the training thread",
	CauseLogging:    "logging",
	CauseCollective: "waiting on other ranks (collective)",
	CausePython:     "Python-side work on the training thread",
	CauseNoSamples:  "no stack samples",
}

// fix is the known remedy for a cause; workers says the DataLoader already
// has worker processes (the wait was on them, not on an in-process fetch).
func fix(k Kind, workers bool) string {
	switch k {
	case CauseDataLoader:
		if workers {
			return "the workers cannot keep up: raise num_workers, prefetch_factor (default 2), set persistent_workers=True and pin_memory=True, or make the transform cheaper"
		}
		return "the batch is built in the training process (num_workers=0): DataLoader(num_workers=4 or more, pin_memory=True, prefetch_factor=2, persistent_workers=True) runs this line in worker processes"
	case CauseSync:
		return "the host waits for the GPU here, and the GPU then waits for the host: keep the value on the GPU (accumulate losses as tensors) and read it every N steps, or copy with .to('cpu', non_blocking=True) and read it a step later"
	case CauseCopy:
		return "pin the host memory (DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with .to(device, non_blocking=True)"
	case CauseCheckpoint:
		return "save less often, or asynchronously: torch.distributed.checkpoint.async_save, or copy the state to pinned CPU memory and write it on another thread"
	case CauseLogging:
		return "log less often (every N steps), and log Python numbers read at that step, not tensors"
	case CauseCollective:
		return "this rank waits for slower ranks: balance the work per rank (uneven batches, data loading on one rank) before tuning communication"
	case CausePython:
		return "the GPU waits while Python runs here: move the work off the training thread (DataLoader workers), onto the GPU, or batch it; CUDA graphs or torch.compile cut launch overhead"
	}
	return ""
}
