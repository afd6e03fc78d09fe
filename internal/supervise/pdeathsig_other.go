//go:build !linux

package supervise

import "syscall"

// setParentDeathSignal does nothing: only Linux can tie a child's life to
// its parent's. Elsewhere a child whose parent was killed keeps running
// until stopped.
func setParentDeathSignal(*syscall.SysProcAttr, syscall.Signal) {}
