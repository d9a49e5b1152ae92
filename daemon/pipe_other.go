//go:build !linux

package daemon

import "os"

func growPipe(*os.File) {}
