// Package capture is the daemon's capture pipeline below the sessions: the
// FIFO an agent streams a snapshot into, copied to the store's part file
// while the engine analyses it (stream.go, pipe_*.go); the spool where agents
// that reached no daemon left their out-of-memory snapshots, read only when
// it is the user's own (spool.go, spool_*.go); and the cache of analyses by
// snapshot id that every analysis.* request, the exporter and the follow-ups
// read, each snapshot decoded once (analyses.go). It knows the store and the
// engine, not the agents, the sessions or the wire: the daemon asks the agent
// to dump, commits the snapshot, and gives the errors met here their codes.
package capture
