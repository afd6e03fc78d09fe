package pglocal

import "syscall"

// setParentDeathSignal asks Linux to send postgres SIGINT, a fast shutdown,
// when the process that started it dies, so that a test binary killed by a
// timeout or a Ctrl-C leaves no server behind.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGINT
}
