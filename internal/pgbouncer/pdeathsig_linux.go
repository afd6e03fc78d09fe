package pgbouncer

import "syscall"

// setParentDeathSignal asks Linux to send pgbouncer SIGTERM when the process
// that started it dies, so that a test binary killed by a timeout or a
// Ctrl-C leaves no pooler behind.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGTERM
}
