// Package store is the daemon's crash-safe snapshot store. It uses the
// standard library only.
//
// Layout of a data directory (mode 0700):
//
//	<dir>/lock                 advisory lock (flock) held by the one daemon using <dir>
//	<dir>/incoming/<name>.part snapshots being written (by agents, or by Import)
//	<dir>/snapshots/<id>.pickle the snapshot, byte for byte as the agent dumped it
//	<dir>/snapshots/<id>.json   its Meta; the meta files are the index
//	<dir>/cache/<id>/<name>     derived data (e.g. summary.json), removed with the snapshot
//
// Commit protocol: a finished .part file in incoming/ is fsynced and hashed
// (SHA-256, streamed), given an ID that sorts by time (20261129T110203.123Z-0001),
// renamed to snapshots/<id>.pickle, and then its Meta is written to a temporary
// file, fsynced and renamed to snapshots/<id>.json; the snapshots directory is
// fsynced last. The rename of the .json is the commit point: a pickle without a
// meta file was never committed. Deletion runs the other way round (meta first).
//
// Open therefore recovers from a crash at any moment by removing .part and
// temporary files, pickles without a meta file, and meta files that do not parse
// or whose pickle is missing or has the wrong size; it reports what it removed in
// Recovered. Open does not hash the pickles (they can be gigabytes); Verify does.
//
// After every commit the oldest snapshots are removed until the store is within
// its Limits (count and bytes); the snapshot just committed is never removed.
package store
