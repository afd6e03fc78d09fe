// Command dev runs a command next to a local PostgreSQL server, for
// development and for the Makefile:
//
//	dev [-dir DIR] [-temp] [-durable] [-port N] [-dev-secrets] [-receiver] -- COMMAND [ARGS...]
//	dev env [-dir DIR]
//
// It starts a private server with the PostgreSQL binaries installed on the
// machine (no Docker), persistent in DIR or, with -temp, in a temporary
// directory removed afterwards. DIR defaults to var/pgdata; as root, whose
// server runs as the `postgres` user (see internal/pglocal), to
// paywebhooks-dev-<hash of the working directory> in that user's home
// (else in /var/tmp), where it can reach it. When a server already runs in
// DIR (another dev's: `make run` in another terminal), dev uses it and
// leaves it running. It creates the database `receiver` and runs COMMAND
// with DATABASE_URL pointing at it and TEST_DATABASE_URL at the server's
// maintenance database, both with the cluster's password, unless they are
// already set. With -dev-secrets it also sets the webhook secret of every
// provider of the registry (internal/providers) that names a development
// prefix, unless set, to a development secret generated once and kept in
// var/dev-secrets.env. One that is set but empty (a command substitution
// that printed nothing, such as $(stripe listen --print-secret) with a CLI
// that is not logged in) stops dev before it starts anything: the receiver
// would run on the development secret, not the one meant.
//
// With -receiver (make run, which implies -dev-secrets) COMMAND is the
// receiver, and dev sets up what a developer needs around it, each unless
// its variable is set: the operator console on 127.0.0.1:8081 with a token
// generated once and kept with the secrets (ADMIN_ADDR, ADMIN_TOKEN), and a
// development fulfillment API on 127.0.0.1 (FULFILLMENT_URL) that answers
// 201, checks each call's signature with FULFILLMENT_SECRET (generated
// once and kept likewise), records every call in var/fulfillment.log and
// prints it. It prints the URLs, the token and how to forward events with
// the Stripe CLI.
//
// `dev env` prints the shell commands that export DATABASE_URL of the
// server running in DIR and the secrets and token of make run's receiver,
// for another terminal: eval "$(bin/dev env)". Those are the development
// ones, except those the developer set when starting make run: while it
// runs, dev -receiver records what its receiver runs with next to the
// secrets file (var/dev-receiver.env, mode 0600, removed when it stops).
//
// COMMAND always gets PAYWEBHOOKS_DEV=1 (config.DevEnv), which lets the
// receiver accept secrets that say "development" and makes its logs text.
//
// COMMAND runs in a process group of its own: SIGINT and SIGTERM, from the
// terminal or elsewhere, reach dev, which passes each on to the whole group
// once. Its standard input is empty, so it should not be interactive. Once
// COMMAND exits, dev stops the server it started and exits with COMMAND's
// status.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/pglocal"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
)

// database is the application database dev creates.
const database = "receiver"

func main() {
	err := run(context.Background(), os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	var status exitStatus
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &status):
		os.Exit(int(status))
	case errors.As(err, &usage):
		if !usage.printed {
			fmt.Fprintln(os.Stderr, "dev:", err)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

// usageError is a command line dev does not understand: exit status 2,
// nothing done. printed: the flag package has already said what is wrong.
type usageError struct {
	err     error
	printed bool
}

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// exitStatus is the error run returns when COMMAND fails: dev exits with
// the same status.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("command exited with status %d", int(s)) }

// options holds the parsed command line.
type options struct {
	dir         string
	temp        bool
	durable     bool
	port        int
	devSecrets  bool
	secretsFile string
	receiver    receiverOptions
	command     []string
}

func parseArgs(args []string, stderr io.Writer) (options, error) {
	var cfg options
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.dir, "dir", "", "PostgreSQL data directory, kept across runs (default var/pgdata; as root, one the postgres user can reach)")
	fs.BoolVar(&cfg.temp, "temp", false, "use a temporary data directory, removed afterwards (ignores -dir)")
	fs.BoolVar(&cfg.durable, "durable", false, "keep PostgreSQL's crash-safety settings (fsync etc.); slower")
	fs.IntVar(&cfg.port, "port", 0, "TCP port on 127.0.0.1 (0: any free port)")
	fs.BoolVar(&cfg.devSecrets, "dev-secrets", false, "set unset webhook secrets to stable development ones")
	fs.StringVar(&cfg.secretsFile, "secrets-file", filepath.Join("var", "dev-secrets.env"), "where -dev-secrets keeps its secrets")
	fs.BoolVar(&cfg.receiver.on, "receiver", false, "COMMAND is the receiver (make run): -dev-secrets, the console with a token, a fulfillment API that records calls")
	fs.IntVar(&cfg.receiver.fulfillmentStatus, "fulfillment-status", http.StatusCreated, "with -receiver, the status the fulfillment API answers a new call with (try 503: the step fails and is retried)")
	fs.StringVar(&cfg.receiver.fulfillmentLog, "fulfillment-log", filepath.Join("var", "fulfillment.log"), "with -receiver, where the fulfillment API records its calls")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dev [-dir DIR] [-temp] [-durable] [-port N] [-dev-secrets] [-receiver] -- COMMAND [ARGS...]")
		fmt.Fprintln(stderr, "       dev env [-dir DIR]    (dev env -h says more)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, usageError{err: err, printed: true}
	}
	if s := cfg.receiver.fulfillmentStatus; s < 200 || s > 599 {
		fs.Usage()
		return cfg, usageError{err: fmt.Errorf("-fulfillment-status %d is not an HTTP status", s)}
	}
	cfg.devSecrets = cfg.devSecrets || cfg.receiver.on
	cfg.command = fs.Args()
	if len(cfg.command) == 0 {
		fs.Usage()
		return cfg, usageError{err: errors.New("no command to run")}
	}
	if cfg.dir == "" && !cfg.temp {
		var err error
		if cfg.dir, err = defaultDir(os.Geteuid() == 0); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// defaultDir is the persistent data directory: var/pgdata, or as root, one
// of the working directory's own in the postgres user's home, which that
// user can reach without a change to the permissions of any directory
// around it; /var/tmp when that home is missing or out of its reach.
func defaultDir(root bool) (string, error) {
	if !root {
		return filepath.Join("var", "pgdata"), nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(wd))
	name := "paywebhooks-dev-" + hex.EncodeToString(sum[:6])
	if u, err := user.Lookup("postgres"); err == nil && u.HomeDir != "" && u.HomeDir != "/" {
		if fi, err := os.Stat(u.HomeDir); err == nil && fi.IsDir() && ownedBy(fi, u.Uid) {
			return filepath.Join(u.HomeDir, name), nil
		}
	}
	return filepath.Join("/var/tmp", name), nil
}

// ownedBy reports whether the file's owner has the numeric user id uid.
func ownedBy(fi os.FileInfo, uid string) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && strconv.FormatUint(uint64(st.Uid), 10) == uid
}

// run is dev without the process-wide effects of main; lookup reads the
// environment (os.LookupEnv).
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "env" {
		return envCmd(args[1:], stdout, stderr)
	}
	cfg, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	if err := refuseEmpty(cfg, lookup); err != nil {
		return err
	}
	getenv := func(key string) string { v, _ := lookup(key); return v }

	// Catch SIGINT and SIGTERM from here on, so that dev always gets to stop
	// the server. Those that arrive while it starts cancel the start; later
	// ones go to the command.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var db server
	if running, ok := findRunning(cfg.dir); !cfg.temp && ok {
		fmt.Fprintf(stderr, "Local PostgreSQL already running on 127.0.0.1:%d, data in %s: using it\n", running.Port(), running.Dir())
		db = running
	} else {
		dir := cfg.dir
		if cfg.temp {
			if dir, err = os.MkdirTemp("", "pgdev"); err != nil {
				return err
			}
			defer os.RemoveAll(dir)
		}
		var logFile io.WriteCloser = nopCloser{io.Discard}
		if !cfg.temp {
			if logFile, err = openLog(dir + ".log"); err != nil {
				return err
			}
		}
		defer logFile.Close() // after the server has stopped
		cluster, err := startDatabase(ctx, cfg, dir, logFile)
		if err != nil {
			return err
		}
		defer stopDatabase(cluster, stderr)
		where := fmt.Sprintf("data in %s (server log in %s.log)", cluster.Dir(), cluster.Dir())
		if cfg.temp {
			where = "temporary data in " + cluster.Dir()
		}
		fmt.Fprintf(stderr, "Local PostgreSQL on 127.0.0.1:%d, %s\n", cluster.Port(), where)
		db = cluster
	}

	env, err := commandEnv(cfg, db, getenv, stderr)
	if err != nil {
		return err
	}
	if cfg.receiver.on {
		more, stop, err := setUpReceiver(cfg, getenv, stderr)
		if err != nil {
			return err
		}
		defer stop()
		env = append(env, more...)
		if !cfg.temp {
			forget, err := recordReceiver(cfg, db, env)
			if err != nil {
				return err
			}
			defer forget()
		}
	}
	return runCommand(cfg.command, env, sigs, stdout, stderr)
}

// refuseEmpty refuses, before anything starts, a variable that dev would
// set to a development value when it is unset but that is set, to
// nothing: a command substitution that printed nothing
// (STRIPE_WEBHOOK_SECRET=$(stripe listen --print-secret) with a CLI that
// is not logged in). Running on the development value instead would
// refuse every delivery signed with the secret the developer meant.
func refuseEmpty(cfg options, lookup func(string) (string, bool)) error {
	var vars []devSecret
	if cfg.devSecrets {
		vars = append(vars, devSecrets...)
	}
	if cfg.receiver.on {
		vars = append(vars, adminToken, fulfillmentSecret)
	}
	var empty []string
	for _, s := range vars {
		if v, set := lookup(s.env); set && strings.TrimSpace(v) == "" {
			empty = append(empty, s.env)
		}
	}
	if len(empty) == 0 {
		return nil
	}
	what, unset := strings.Join(empty, ", ")+" are", ""
	if len(empty) == 1 {
		what = empty[0] + " is"
	}
	for _, name := range empty {
		unset += " -u " + name
	}
	return fmt.Errorf("%s set but empty: not starting, for the receiver would run with a development value in its place, "+
		"not the one you meant, and refuse what is signed with yours.\n"+
		"  If it came from a command, as in STRIPE_WEBHOOK_SECRET=$(stripe listen --print-secret) make run, that command "+
		"printed nothing: a CLI that is not logged in prints no secret (run `stripe login`, then start again).\n"+
		"  To use the development value instead, leave it unset: env%s make run", what, unset)
}

// startDatabase starts the server in dir, logging to log, and creates the
// application database, giving up on SIGINT or SIGTERM.
func startDatabase(ctx context.Context, cfg options, dir string, log io.Writer) (*pglocal.Cluster, error) {
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer cancel()

	opts := pglocal.Options{Dir: dir, Port: cfg.port, Durable: cfg.durable, Log: log}
	cluster, err := pglocal.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := cluster.CreateDatabase(ctx, database); err != nil {
		stopDatabase(cluster, io.Discard)
		return nil, err
	}
	return cluster, nil
}

// openLog opens the server log kept next to a persistent data directory,
// readable by its owner only: it may quote rows.
func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func stopDatabase(c *pglocal.Cluster, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		fmt.Fprintln(stderr, "dev:", err)
	}
}

// commandEnv returns the environment for the command, telling the user
// what it adds.
func commandEnv(cfg options, c server, getenv func(string) string, stderr io.Writer) ([]string, error) {
	// The last value of a key wins (os/exec): this one, whatever the
	// environment says.
	env := append(os.Environ(), config.DevEnv+"=1")
	setDefault := func(key, value string) bool {
		if getenv(key) != "" {
			fmt.Fprintf(stderr, "%s is already set: leaving it\n", key)
			return false
		}
		env = append(env, key+"="+value)
		return true
	}
	if setDefault("DATABASE_URL", c.URL(database)) {
		fmt.Fprintf(stderr, "DATABASE_URL=%s\n", c.URL(database))
	}
	setDefault("TEST_DATABASE_URL", c.URL("postgres"))

	if cfg.devSecrets {
		secrets, err := loadDevSecrets(cfg.secretsFile)
		if err != nil {
			return nil, err
		}
		for _, s := range devSecrets {
			if setDefault(s.env, secrets[s.env]) {
				fmt.Fprintf(stderr, "Development %s: %s\n", s.label, secrets[s.env])
				if s.hint != "" {
					fmt.Fprintln(stderr, s.hint)
				}
			}
		}
		printMailDestination(stderr, getenv)
	}
	return env, nil
}

// devSecrets are the webhook secrets -dev-secrets provides: one for every
// provider of the registry that names a development prefix.
var devSecrets = func() []devSecret {
	var out []devSecret
	for _, s := range providers.All() {
		if v := s.Secret; v.DevPrefix != "" {
			out = append(out, devSecret{env: v.Name, label: s.Source + " webhook secret (" + v.Name + ")", hint: v.DevHint,
				make: func() string { return v.DevValue(randomHex(24)) }, fits: v.Fits})
		}
	}
	return out
}()

type devSecret struct {
	env, label, hint string
	// make returns a new value; nil: 48 random hex digits.
	make func() string
	// fits reports whether a kept value is still one start-up takes
	// without a word (a provider's rules may have grown); nil: any is.
	fits func(string) bool
}

// newValue returns a new value for s.
func (s devSecret) newValue() string {
	if s.make != nil {
		return s.make()
	}
	return randomHex(24)
}

// adminToken is the console's sign-in token -receiver sets, and
// fulfillmentSecret the key the receiver signs its calls to the development
// fulfillment API with, which that API verifies: both kept in the secrets
// file with the webhook secrets.
var (
	adminToken        = devSecret{env: "ADMIN_TOKEN", label: "console token"}
	fulfillmentSecret = devSecret{env: "FULFILLMENT_SECRET", label: "fulfillment API secret", make: standardwebhooks.NewSecret}
)

// generated are the values kept in the secrets file.
var generated = append(devSecrets[:len(devSecrets):len(devSecrets)], adminToken, fulfillmentSecret)

// loadDevSecrets reads the development secrets from path, generating and
// saving any that are missing, or that start-up would no longer take, so
// they stay the same from run to run.
func loadDevSecrets(path string) (map[string]string, error) {
	secrets, err := readEnvFile(path)
	if err != nil {
		return nil, err
	}
	changed := false
	for _, s := range generated {
		if secrets[s.env] == "" || (s.fits != nil && !s.fits(secrets[s.env])) {
			secrets[s.env] = s.newValue()
			changed = true
		}
	}
	if changed {
		if err := writeEnvFile(path, secrets); err != nil {
			return nil, err
		}
	}
	return secrets, nil
}

// readEnvFile reads KEY=VALUE lines, skipping blank lines and # comments.
// A missing file holds nothing.
func readEnvFile(path string) (map[string]string, error) {
	vars := map[string]string{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return vars, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read development secrets: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if key, value, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			vars[strings.TrimSpace(key)] = strings.TrimSpace(value)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read development secrets: %w", err)
	}
	return vars, nil
}

func writeEnvFile(path string, vars map[string]string) error {
	keys := make([]string, len(generated))
	for i, s := range generated {
		keys[i] = s.env
	}
	err := writeVars(path, "Development webhook secrets and console token, generated by cmd/dev. Never use them in production.", keys, vars)
	if err != nil {
		return fmt.Errorf("save development secrets: %w", err)
	}
	return nil
}

// writeVars writes a comment line, then KEY=VALUE lines of keys, in their
// order, to path, readable by its owner only.
func writeVars(path, comment string, keys []string, vars map[string]string) error {
	var b strings.Builder
	b.WriteString("# " + comment + "\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, vars[k])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// runCommand runs argv in a process group of its own, passing on the
// signals that arrive on sigs, and returns its exit status as an
// exitStatus error (nil for success).
func runCommand(argv, env []string, sigs <-chan os.Signal, stdout, stderr io.Writer) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			// To the whole group, as a Ctrl-C would: `go run` and `go
			// test` leave the signal to the programs they start.
			_ = syscall.Kill(-cmd.Process.Pid, sig.(syscall.Signal))
		case err := <-done:
			return statusOf(err)
		}
	}
}

// statusOf turns the result of Wait into an exitStatus, using the shell's
// 128+N for a command killed by signal N.
func statusOf(err error) error {
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return err
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitStatus(128 + int(ws.Signal()))
	}
	return exitStatus(exitErr.ExitCode())
}

// printMailDestination says where the receiver's mail goes, so a developer
// knows where to look for the confirmation email of a test checkout.
func printMailDestination(stderr io.Writer, getenv func(string) string) {
	switch {
	case getenv("SMTP_ADDR") != "":
		fmt.Fprintf(stderr, "Mail: sent over SMTP to %s\n", getenv("SMTP_ADDR"))
	case getenv("MAIL_DIR") != "":
		fmt.Fprintf(stderr, "Mail: written as .eml files to %s (set SMTP_ADDR to send it)\n", getenv("MAIL_DIR"))
	default:
		fmt.Fprintln(stderr, "Mail: written as .eml files to ./var/mail (set SMTP_ADDR to send it)")
	}
}
