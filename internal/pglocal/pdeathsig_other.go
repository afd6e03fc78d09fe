//go:build !linux

package pglocal

import "syscall"

// setParentDeathSignal does nothing: only Linux can tie a child's life to
// its parent's. Elsewhere a server whose parent was killed keeps running
// until stopped; clearStalePID reports it on the next start.
func setParentDeathSignal(*syscall.SysProcAttr) {}
