//go:build !linux

package pgbouncer

import "syscall"

// setParentDeathSignal does nothing: only Linux can tie a child's life to
// its parent's.
func setParentDeathSignal(*syscall.SysProcAttr) {}
