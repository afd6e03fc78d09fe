package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The exit status of every command says what happened (docs/commands.md
// documents it).
const (
	// exitOK: the command did what was asked.
	exitOK = 0
	// exitFailure: it failed (configuration, the database, a provider's
	// API), or left work that is retried (a step that failed, a lease
	// another worker holds).
	exitFailure = 1
	// exitUsage: the command line is wrong, or the command refused to run
	// (its shell differs from the running receivers); nothing was done.
	exitUsage = 2
	// exitUnresolved: it ran to its end, and left something that waits
	// for an operator: an event parked, a finding it could not resolve.
	exitUnresolved = 3
)

// usageError is a command line the binary does not understand: what is
// wrong, and the usage of the command it was meant for. Exit 2.
type usageError struct {
	msg   string
	usage string
}

func (u usageError) Error() string { return u.msg }

// unresolvedError is a command that did its work and left something
// waiting for an operator. Exit 3.
type unresolvedError struct{ msg string }

func (u unresolvedError) Error() string { return u.msg }

// errHelp is returned once a command printed the help it was asked for:
// run turns it into success.
var errHelp = errors.New("help printed")

func exitCode(err error) int {
	var u usageError
	var un unresolvedError
	var r refusedError
	switch {
	case err == nil || errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &u), errors.As(err, &r):
		return exitUsage
	case errors.As(err, &un):
		return exitUnresolved
	}
	return exitFailure
}

// report writes what an error means to stderr: a usage error with the
// command's usage, anything else on one line.
func report(err error, stderr io.Writer) {
	var u usageError
	var un unresolvedError
	switch {
	case err == nil || errors.Is(err, errHelp):
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "%s\n\n%s", u.msg, u.usage)
	case errors.As(err, &un):
		fmt.Fprintln(stderr, un.msg)
	default:
		fmt.Fprintln(stderr, "error:", err)
	}
}

// command is one command's flags and usage. Its flags may come before and
// after its positional arguments; -h and --help print its usage to stdout
// and need no configuration.
type command struct {
	name     string // as typed after `server`: "events list"
	synopsis string // its usage lines, each starting with "server "
	about    string // what it does, in a few lines; may be empty
	fs       *flag.FlagSet
}

func newCommand(name, synopsis, about string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package's own messages are replaced by usageError's.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &command{name: name, synopsis: synopsis, about: about, fs: fs}
}

// usage is the command's usage text: its synopsis, what it does and its
// flags.
func (c *command) usage() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, l := range strings.Split(strings.TrimRight(c.synopsis, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	if c.about != "" {
		b.WriteString("\n" + strings.TrimRight(c.about, "\n") + "\n")
	}
	var flags strings.Builder
	tw := tabwriter.NewWriter(&flags, 0, 0, 3, ' ', 0)
	c.fs.VisitAll(func(f *flag.Flag) {
		arg, help := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if arg != "" {
			name += " " + strings.ToUpper(arg)
		}
		switch f.DefValue {
		case "", "0", "0s", "false":
		default:
			help += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, help)
	})
	_ = tw.Flush()
	if flags.Len() > 0 {
		b.WriteString("\nflags:\n" + flags.String())
	}
	return b.String()
}

// fail is a usage error of this command.
func (c *command) fail(format string, a ...any) error {
	return usageError{msg: "server " + c.name + ": " + fmt.Sprintf(format, a...), usage: c.usage()}
}

// parse parses the command's arguments and returns the positional ones. It
// returns errHelp once it printed the usage to stdout for -h or --help,
// and a usage error for a flag it does not know or a value it cannot read.
func (c *command) parse(args []string, stdout io.Writer) ([]string, error) {
	var positional []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, c.usage())
				return nil, errHelp
			}
			return nil, c.fail("%v", err)
		}
		rest := c.fs.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			// After "--" everything is positional.
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// group is a command made of subcommands (`server events …`).
type group struct {
	name  string
	usage string
}

// subcommand returns the subcommand args name: a usage error when there is
// none, errHelp once the group's usage was printed for -h, --help or help.
func (g group) subcommand(args []string, stdout io.Writer) (string, error) {
	if len(args) == 0 {
		return "", usageError{msg: "server " + g.name + ": a command is needed", usage: g.usage}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, g.usage)
		return "", errHelp
	}
	return args[0], nil
}

// unknown is the usage error of a subcommand the group does not have, with
// the nearest of those it has (names).
func (g group) unknown(name string, names ...string) error {
	return usageError{msg: fmt.Sprintf("server %s: unknown command %q", g.name, name) + didYouMean(name, names), usage: g.usage}
}

// didYouMean is "; did you mean \"events\"?" when one of names is near
// enough to name to be a slip of the keyboard (didYouMean("evnets", …)),
// else "".
func didYouMean(name string, names []string) string {
	best, bestDist := "", 0
	for _, n := range names {
		d := editDistance(strings.ToLower(name), n)
		// A slip: a third of the name's letters at most (one in a short
		// name), or the start of a longer name.
		near := d <= max(1, len(n)/3) || (len(name) >= 3 && strings.HasPrefix(n, strings.ToLower(name)))
		if near && (best == "" || d < bestDist) {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the number of letters inserted, deleted, replaced or
// swapped with their neighbour that turn a into b (optimal string
// alignment distance).
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// plural is n and the noun, plural unless n is one: "1 event", "2 events".
func plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printJSON writes v to w as indented JSON, for scripts (--json).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// given is the name among names (a flag's and its former names) that the
// command line set, the first when it set none.
func given(c *command, names ...string) string {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, n := range names {
		if set[n] {
			return n
		}
	}
	return names[0]
}
