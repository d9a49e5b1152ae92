// Package idle says why a GPU sat idle, down to the Python line: it joins
// where a process's training thread was (stack samples the in-process agent
// takes at 20-50 Hz) with how busy its GPU was (NVML utilisation, about once
// a second) and splits the idle time into causes — the data loader and the
// user's transform lines, host-device syncs, host-device copies, checkpoint
// saves, logging, Python-side work, collective waits — each with its share
// of wall time, its line and a fix where one is known.
//
// The join (join.go) works window by window. A window is the time between two
// utilisation readings; its idle time is (1 - busy) of its length, where busy
// is utilization.gpu, or GPM's SM activity when utilization.gpu reads busy
// while no SM is (a pure copy reads ~97%). The idle time goes to the
// window's samples whose thread was not waiting for the GPU (a thread in a
// sync waits while the GPU works); Python-side samples in a window with a sync
// are the sync's (without it the host would have run ahead of the GPU).
//
// The package is the standard library only; the daemon feeds it (input.go),
// the CLI and the editor read its Report (report.go).
package idle
