// Package supervise runs a server program as a child process, for the
// packages that start private servers for tests, the benchmark and the
// development tool: internal/pglocal (PostgreSQL) and internal/pgbouncer
// (PgBouncer).
//
// A child runs in its own process group, so that a Ctrl-C in the terminal
// does not reach it before its owner stops it cleanly; on Linux it is sent
// a signal of its owner's choice when the process that started it dies, so
// that a test binary killed by a timeout leaves no server behind. As root
// it runs as the `postgres` OS user (Credential): PostgreSQL and PgBouncer
// both refuse to run as root. Its output goes through a Tail, which keeps
// its last part for error messages.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// Credential returns the `postgres` OS user, with its groups, to run
// program as when the current process is root, and nil otherwise. program
// names the server in the error.
func Credential(program string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and %s refuses to: look up the `postgres` user to run it as: %w", program, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parse uid of user postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parse gid of user postgres: %w", err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	ids, _ := u.GroupIds() // without them, the server runs with its primary group only
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != cred.Gid {
			cred.Groups = append(cred.Groups, uint32(g))
		}
	}
	return cred, nil
}

// FreePort asks the kernel for a free TCP port on 127.0.0.1. Someone else
// may take it before the server binds it: a caller retries a start that
// failed on it.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is a started child process.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait has returned
	err  error         // the result of Wait, set before done is closed
}

// Start starts cmd in its own process group, as cred's user unless cred is
// nil, and waits for it in the background. On Linux, the child is sent
// deathSignal when the process that started it dies. cmd.SysProcAttr is
// replaced.
//
// Linux sends the parent-death signal when the *thread* that started the
// child exits, and the Go runtime may end threads: the goroutine that
// starts the child keeps its thread locked until the child exits.
func Start(cmd *exec.Cmd, cred *syscall.Credential, deathSignal syscall.Signal) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	setParentDeathSignal(cmd.SysProcAttr, deathSignal)
	p := &Process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// PID returns the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the child has exited and its output is read to the
// end (exec.Cmd's Wait has returned).
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns what Wait returned (nil, or how the child exited) once Done
// is closed, and nil before.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Exited reports whether Done is closed.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the child; a child that has exited already is not
// signalled.
func (p *Process) Signal(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(sig) // fails only once the process is gone
}

// Stop sends sig and reports whether the child exits within d and before
// ctx ends: what a caller escalates from (another signal, Kill).
func (p *Process) Stop(ctx context.Context, sig syscall.Signal, d time.Duration) bool {
	p.Signal(sig)
	return p.Wait(ctx, d)
}

// Kill sends SIGKILL and waits until the child has exited.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Wait reports whether the child exits within d and before ctx ends (a
// child that has exited already, whatever ctx).
func (p *Process) Wait(ctx context.Context, d time.Duration) bool {
	if p.Exited() {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// ErrExited is what WaitReady returns when the child exits first.
var ErrExited = errors.New("exited during start-up")

// WaitReady calls probe every interval until it reports the child ready,
// and returns nil then. It returns probe's error as soon as probe returns
// one (a failure no wait mends), ErrExited if the child exits first, and
// ctx's error if ctx ends first.
func (p *Process) WaitReady(ctx context.Context, interval time.Duration, probe func(context.Context) (bool, error)) error {
	for {
		ready, err := probe(ctx)
		if err != nil {
			return err
		}
		if ready {
			return nil
		}
		select {
		case <-p.done:
			return ErrExited
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
