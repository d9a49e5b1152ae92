package transport

import "fmt"

// Descriptors the daemon keeps for itself and its owner, whatever the other
// listeners hold: the store's files, NVML, the listeners themselves
// (baseDescriptors), and the owner's Unix socket connections, imports and
// agents' hand-overs (ownerReserve: a quarter of the limit, at least 16).
// The campaign's keep-alive connections to the metrics port took 20,000 of
// 20,000 descriptors and the owner's status timed out.
const (
	baseDescriptors = 16
	MinOwnerReserve = 16
)

// ExportMaxConns is the metrics listener's connection cap before the
// descriptor budget: Prometheus holds one connection per scraper, pprof one
// per profile fetch.
const ExportMaxConns = 64

// Budget is how many connections each listener other than the Unix socket
// may hold, sized from the file descriptor limit.
type Budget struct {
	nofile  int    // RLIMIT_NOFILE, the soft limit (Go raises it to the hard one)
	reserve int    // kept for the owner
	TCP     Limits // the TCP listener's limits, lowered to fit
	Export  int    // metrics connections
}

// SizeBudget fits TCP's limits and the metrics cap into what nofile leaves
// once the owner's reserve is set aside, lowering each where it must; it
// refuses a limit too low to serve anything (0: unknown, nothing lowered).
func SizeBudget(nofile int, lim Limits) (Budget, error) {
	b := Budget{nofile: nofile, TCP: lim, Export: ExportMaxConns}
	if nofile <= 0 {
		return b, nil
	}
	b.reserve = max(MinOwnerReserve, nofile/4)
	spare := nofile - baseDescriptors - b.reserve
	if spare < 4 {
		return b, fmt.Errorf("the daemon may open %d file descriptors (ulimit -n); it needs at least %d: raise the limit", nofile, baseDescriptors+MinOwnerReserve+4)
	}
	// Shares of what is spare: pending TCP a quarter, authenticated TCP a
	// half, metrics a quarter (each at least 1).
	b.TCP.Pending = min(lim.Pending, max(1, spare/4))
	b.TCP.PendingPeer = min(lim.PendingPeer, b.TCP.Pending)
	b.TCP.Authed = min(lim.Authed, max(1, spare/2))
	b.Export = min(ExportMaxConns, max(1, spare/4))
	return b, nil
}

// String is the budget as the daemon logs it at start.
func (b Budget) String() string {
	return fmt.Sprintf("%d file descriptors: %d kept for the owner's socket and the store; TCP %d waiting for hello (%d a user) and %d past it, metrics %d",
		b.nofile, b.reserve+baseDescriptors, b.TCP.Pending, b.TCP.PendingPeer, b.TCP.Authed, b.Export)
}
