// Package capture is the daemon's capture pipeline below the sessions: the
// FIFO an agent streams a snapshot into, copied to the store's part file
// while the engine analyses it (stream.go, pipe_*.go), and the cache of
// analyses by snapshot id that every analysis.* request, the exporter and
// the follow-ups read (analyses.go). It knows the store and the engine, not
// the agents, sessions or the wire: the daemon asks the agent to dump,
// commits the snapshot and maps these errors to codes.
package capture
