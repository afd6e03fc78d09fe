package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/paywebhooks/receiver/internal/pglocal"
	"github.com/paywebhooks/receiver/internal/providers"
)

// server is the PostgreSQL server a command runs next to: one dev
// started (a *pglocal.Cluster), or one already running in the same data
// directory (an *attached), which dev uses and leaves running.
type server interface {
	URL(dbname string) string
	Port() int
	Dir() string
}

// attached is a server that another dev (make run, say) started in the
// same data directory and still runs.
type attached struct {
	dir, password string
	port          int
}

func (a *attached) URL(dbname string) string { return pglocal.URL(a.port, a.password, dbname) }

func (a *attached) Port() int   { return a.port }
func (a *attached) Dir() string { return a.dir }

// findRunning returns the server running in the data directory dir, if
// one is: its postmaster.pid names a live process, says it is ready, and
// gives its port; its password is pglocal's PasswordFile. A stale pid file
// (a server that died) is no server: pglocal.Start clears it.
func findRunning(dir string) (*attached, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(abs, "postmaster.pid"))
	if err != nil {
		return nil, false
	}
	// postmaster.pid: PID, data directory, start time, port, socket
	// directory, listen address, shared memory key, status.
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[7]) != "ready" {
		return nil, false
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(lines[0]))
	port, err2 := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err1 != nil || err2 != nil || pid <= 0 || port <= 0 {
		return nil, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return nil, false
	}
	pass, err := os.ReadFile(filepath.Join(abs, pglocal.PasswordFile))
	if err != nil || strings.TrimSpace(string(pass)) == "" {
		return nil, false
	}
	return &attached{dir: abs, password: strings.TrimSpace(string(pass)), port: port}, true
}

// envCmd is `dev env`: the shell commands that export the development
// environment of the server running in the data directory (make run's):
// DATABASE_URL, with its password, and the secrets and token of its
// receiver (the receiver file's, else the secrets file's), for
// `eval "$(bin/dev env)"`.
func envCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev env", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "PostgreSQL data directory (default: make run's)")
	secretsFile := fs.String("secrets-file", filepath.Join("var", "dev-secrets.env"), "where make run keeps its development secrets")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: dev env [-dir DIR] [-secrets-file FILE]

Prints shell commands that export DATABASE_URL (with its password) of the
development PostgreSQL that make run (or another dev) is running, and the
secrets and console token make run's receiver runs with (the development
ones, or those set in make run's shell, such as STRIPE_WEBHOOK_SECRET from
stripe listen), so that another terminal can run the operator commands and
the load generator against it:

  eval "$(bin/dev env)"
  bin/server events list

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err: err, printed: true}
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageError{err: fmt.Errorf("dev env takes no arguments, got %q", fs.Args())}
	}
	if *dir == "" {
		var err error
		if *dir, err = defaultDir(os.Geteuid() == 0); err != nil {
			return err
		}
	}
	db, ok := findRunning(*dir)
	if !ok {
		return fmt.Errorf("no development PostgreSQL is running in %s: start it with `make run` "+
			"(or run one command next to it with `bin/dev -- COMMAND`)", *dir)
	}
	secrets, err := readEnvFile(*secretsFile)
	if err != nil {
		return err
	}
	running, err := runningReceiver(*secretsFile, db.Dir())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "export DATABASE_URL=%s;\n", shellQuote(db.URL(database)))
	for _, k := range exported {
		v := secrets[k]
		if r, ok := running[k]; ok {
			if r != v {
				fmt.Fprintf(stderr, "dev env: %s as make run's receiver runs with it (set in its shell), not the development one\n", k)
			}
			v = r
		}
		if v != "" {
			fmt.Fprintf(stdout, "export %s=%s;\n", k, shellQuote(v))
		}
	}
	return nil
}

// exported are the variables `dev env` exports besides DATABASE_URL: what
// dev -receiver sets up beside its receiver (the development fulfillment
// API's address, the console's), those dev generates, then the secret of
// every other provider of the registry, which a receiver may run with when
// the developer set it: a command run from that shell (`server events
// replay`) then has the receiver's configuration.
var exported = func() []string {
	out := []string{"FULFILLMENT_URL", "ADMIN_ADDR"}
	for _, s := range generated {
		out = append(out, s.env)
	}
	for _, s := range providers.All() {
		if !slices.Contains(out, s.Secret.Name) {
			out = append(out, s.Secret.Name)
		}
	}
	return out
}()

// The receiver file: while dev -receiver (make run) runs its receiver, it
// records there, next to the development secrets, the value of each
// exported variable the receiver runs with (the development one, or the
// developer's own: STRIPE_WEBHOOK_SECRET from `stripe listen`), with its
// own process id and the server's data directory; `dev env` exports
// those. It is removed when dev exits; one whose process is gone, or that
// names another data directory, is ignored.
const (
	receiverPIDKey = "DEV_PID"
	receiverDirKey = "DEV_DATA_DIR"
)

func receiverFile(secretsFile string) string {
	return filepath.Join(filepath.Dir(secretsFile), "dev-receiver.env")
}

// recordReceiver writes the receiver file for a receiver that runs with
// env next to db, and returns what removes it.
func recordReceiver(cfg options, db server, env []string) (forget func(), err error) {
	dir, err := filepath.Abs(db.Dir())
	if err != nil {
		return nil, err
	}
	pid := strconv.Itoa(os.Getpid())
	vars := map[string]string{receiverPIDKey: pid, receiverDirKey: dir}
	keys := []string{receiverPIDKey, receiverDirKey}
	for _, k := range exported {
		if v := lastValue(env, k); v != "" {
			vars[k] = v
			keys = append(keys, k)
		}
	}
	path := receiverFile(cfg.secretsFile)
	if err := writeVars(path, "What the receiver of make run (bin/dev -receiver) runs with, for `bin/dev env`; removed when it stops.", keys, vars); err != nil {
		return nil, fmt.Errorf("record the receiver's secrets: %w", err)
	}
	return func() {
		if now, err := readEnvFile(path); err == nil && now[receiverPIDKey] == pid {
			_ = os.Remove(path)
		}
	}, nil
}

// runningReceiver reads the receiver file of a receiver that runs next to
// the server in dir: nil when there is none.
func runningReceiver(secretsFile, dir string) (map[string]string, error) {
	vars, err := readEnvFile(receiverFile(secretsFile))
	if err != nil || len(vars) == 0 {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	pid, err := strconv.Atoi(vars[receiverPIDKey])
	if err != nil || pid <= 0 || vars[receiverDirKey] != abs {
		return nil, nil
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return nil, nil
	}
	return vars, nil
}

// lastValue is the value of key in env, a list of KEY=VALUE in which the
// last one wins (os/exec); "" when it has none.
func lastValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
