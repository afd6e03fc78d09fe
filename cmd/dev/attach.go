package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/paywebhooks/receiver/internal/pglocal"
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
// DATABASE_URL, with its password, and the development secrets of the
// secrets file, for `eval "$(bin/dev env)"`.
func envCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev env", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "PostgreSQL data directory (default: make run's)")
	secretsFile := fs.String("secrets-file", filepath.Join("var", "dev-secrets.env"), "where make run keeps its development secrets")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: dev env [-dir DIR] [-secrets-file FILE]

Prints shell commands that export DATABASE_URL (with its password) of the
development PostgreSQL that make run (or another dev) is running, and the
development secrets make run uses, so that another terminal can run the
operator commands and the load generator against it:

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
	fmt.Fprintf(stdout, "export DATABASE_URL=%s;\n", shellQuote(db.URL(database)))
	for _, s := range generated {
		if v := secrets[s.env]; v != "" {
			fmt.Fprintf(stdout, "export %s=%s;\n", s.env, shellQuote(v))
		}
	}
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
