//go:build !unix

package transport

// FileLimit is unknown here: the listeners keep their configured limits.
func FileLimit() int { return 0 }
