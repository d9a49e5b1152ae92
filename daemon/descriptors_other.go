//go:build !unix

package daemon

// fileLimit is unknown here: the listeners keep their configured limits.
func fileLimit() int { return 0 }
