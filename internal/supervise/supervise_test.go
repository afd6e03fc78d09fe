package supervise

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests' children are this test binary, run again with childEnv set to
// what the child does.
const childEnv = "SUPERVISE_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		child(mode)
		return
	}
	os.Exit(m.Run())
}

// child is the test binary as a child:
//   - "serve": says "ready" and waits for a signal (SIGTERM ends it);
//   - "stubborn": ignores SIGTERM, says "ready" and waits for SIGKILL;
//   - "fail": says "oops" and exits 3;
//   - "parent": starts a "serve" child of its own, prints its PID and exits,
//     as a test binary killed by a timeout does.
func child(mode string) {
	switch mode {
	case "serve":
		fmt.Println("ready")
		select {}
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		select {}
	case "fail":
		fmt.Println("oops")
		os.Exit(3)
	case "parent":
		p, err := Start(command("serve", nil), nil, syscall.SIGTERM)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(p.PID())
		os.Exit(0)
	}
	os.Exit(2)
}

// command runs this test binary as a child doing mode, its output to out.
func command(mode string, out *Tail) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// said is a WaitReady probe: ready once the child has written word.
func said(out *Tail, word string) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) { return strings.Contains(out.String(), word), nil }
}

func start(t *testing.T, mode string) (*Process, *Tail) {
	t.Helper()
	out := NewTail(nil, 1<<10)
	p, err := Start(command(mode, out), nil, syscall.SIGTERM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p, out
}

// startReady starts a child doing mode and waits until it says "ready".
func startReady(t *testing.T, mode string) *Process {
	t.Helper()
	p, out := start(t, mode)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx, 10*time.Millisecond, said(out, "ready")); err != nil {
		t.Fatalf("WaitReady: %v (output %q)", err, out.String())
	}
	return p
}

// TestStartStop: a child runs in its own process group until a signal ends
// it; Done, Exited and Err say so.
func TestStartStop(t *testing.T) {
	p := startReady(t, "serve")
	ctx := context.Background()
	if pgid, err := syscall.Getpgid(p.PID()); err != nil || pgid != p.PID() {
		t.Errorf("process group of the child = %d (%v), want its own, %d", pgid, err, p.PID())
	}
	if p.Exited() || p.Err() != nil {
		t.Fatalf("a running child: Exited %v, Err %v", p.Exited(), p.Err())
	}
	if !p.Stop(ctx, syscall.SIGTERM, time.Minute) {
		t.Fatal("the child outlived SIGTERM")
	}
	if !p.Exited() {
		t.Error("Exited is false after Stop")
	}
	var exit *exec.ExitError
	if err := p.Err(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("Err = %v, want the child's death by SIGTERM", err)
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done is open after Stop")
	}
	p.Signal(syscall.SIGTERM) // a child that is gone: nothing happens
}

// TestStopEscalates: Stop reports a child that outlives its signal, and
// Kill ends it.
func TestStopEscalates(t *testing.T) {
	p := startReady(t, "stubborn")
	ctx := context.Background()
	if p.Stop(ctx, syscall.SIGTERM, 100*time.Millisecond) {
		t.Fatal("Stop says a child that ignores SIGTERM exited")
	}
	p.Kill()
	if !p.Exited() {
		t.Error("Exited is false after Kill")
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if !p.Wait(canceled, time.Minute) {
		t.Error("Wait on a child that has exited: false")
	}
}

// TestWaitReady: a child that exits while it is awaited, a probe that
// fails, a context that ends.
func TestWaitReady(t *testing.T) {
	t.Run("Exits", func(t *testing.T) {
		p, out := start(t, "fail")
		err := p.WaitReady(context.Background(), 10*time.Millisecond, said(out, "never"))
		if !errors.Is(err, ErrExited) {
			t.Fatalf("WaitReady = %v, want ErrExited", err)
		}
		var exit *exec.ExitError
		if !errors.As(p.Err(), &exit) || exit.ExitCode() != 3 {
			t.Errorf("Err = %v, want exit status 3", p.Err())
		}
		if got := out.String(); got != "oops\n" {
			t.Errorf("output %q, want oops", got)
		}
	})
	t.Run("ProbeFails", func(t *testing.T) {
		p, _ := start(t, "serve")
		refused := errors.New("refused")
		calls := 0
		err := p.WaitReady(context.Background(), 10*time.Millisecond, func(context.Context) (bool, error) {
			calls++
			return false, refused
		})
		if err != refused || calls != 1 {
			t.Errorf("WaitReady = %v after %d probes, want the probe's error after 1", err, calls)
		}
	})
	t.Run("ContextEnds", func(t *testing.T) {
		p, _ := start(t, "serve")
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := p.WaitReady(ctx, time.Hour, func(context.Context) (bool, error) {
			calls++
			cancel()
			return false, nil
		})
		if !errors.Is(err, context.Canceled) || calls != 1 {
			t.Errorf("WaitReady = %v after %d probes, want context.Canceled after 1", err, calls)
		}
	})
}

// TestParentDeathSignal: a child's owner dies without stopping it, as a
// test binary killed by a timeout does; Linux sends the child the signal
// Start was given, and it exits.
func TestParentDeathSignal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux ties a child's life to its parent's")
	}
	out, err := command("parent", nil).Output()
	if err != nil {
		t.Fatalf("parent: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("parent printed %q", out)
	}
	deadline := time.Now().Add(time.Minute)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the child (PID %d) still runs a minute after its parent died", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie nobody reaps has exited).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	end := strings.LastIndexByte(s, ')')
	return end < 0 || len(s) < end+3 || s[end+2] != 'Z'
}

// TestCredential: as root, a child runs as the `postgres` user; otherwise
// as we do.
func TestCredential(t *testing.T) {
	cred, err := Credential("TestServer")
	if os.Geteuid() != 0 {
		if cred != nil || err != nil {
			t.Fatalf("Credential = %+v, %v; want nil, nil when not root", cred, err)
		}
	} else {
		u, lerr := user.Lookup("postgres")
		if lerr != nil {
			if err == nil || !strings.Contains(err.Error(), "TestServer refuses to") {
				t.Fatalf("as root without a postgres user: Credential error %v, want one naming TestServer", err)
			}
			t.Skip(lerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strconv.FormatUint(uint64(cred.Uid), 10) != u.Uid || strconv.FormatUint(uint64(cred.Gid), 10) != u.Gid {
			t.Errorf("Credential = %d:%d, want postgres's %s:%s", cred.Uid, cred.Gid, u.Uid, u.Gid)
		}
	}
	id, err := exec.LookPath("id")
	if err != nil {
		t.Skip(err)
	}
	out := NewTail(nil, 1<<10)
	cmd := exec.Command(id, "-u")
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = out, out
	p, err := Start(cmd, cred, syscall.SIGTERM)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Wait(context.Background(), time.Minute) || p.Err() != nil {
		t.Fatalf("id -u: %v %s", p.Err(), out)
	}
	want := os.Geteuid()
	if cred != nil {
		want = int(cred.Uid)
	}
	if got := strings.TrimSpace(out.String()); got != strconv.Itoa(want) {
		t.Errorf("the child runs as uid %s, want %d", got, want)
	}
}

// TestFreePort: the port is free on 127.0.0.1.
func TestFreePort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	l.Close()
}

// TestTail: everything is copied; the last size bytes are kept; Lines
// quotes the last lines; Reset forgets.
func TestTail(t *testing.T) {
	var all strings.Builder
	tail := NewTail(&all, 8)
	for _, s := range []string{"one\n", "two\n", "three\n"} {
		if n, err := tail.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if all.String() != "one\ntwo\nthree\n" {
		t.Errorf("copied %q", all.String())
	}
	if got := tail.String(); got != "o\nthree\n" {
		t.Errorf("kept %q, want the last 8 bytes", got)
	}
	if got := tail.Lines(1); got != "three" {
		t.Errorf("Lines(1) = %q", got)
	}
	if got := tail.Lines(5); got != "o\nthree" {
		t.Errorf("Lines(5) = %q", got)
	}
	tail.Reset()
	tail.Write([]byte("four\n"))
	if got := tail.String(); got != "four\n" {
		t.Errorf("after Reset, kept %q", got)
	}
	if n, err := NewTail(nil, 4).Write([]byte("no copy")); n != 7 || err != nil {
		t.Errorf("Write without a writer = %d, %v", n, err)
	}
}
