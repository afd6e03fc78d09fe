package supervise

import "syscall"

// setParentDeathSignal asks Linux to send the child sig when the process
// (the thread: see Start) that started it dies.
func setParentDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {
	attr.Pdeathsig = sig
}
