// Package pgbench holds the pgbench scripts the benchmark (bench/cmd/benchrun)
// runs next to the receiver, one readable .sql file each, so that a change to
// the receiver's SQL is a change to one file here:
//
//	receiver_new.sql    (a) the receiver's transaction for a new invoice.created, pipelined:
//	                        at the HTTP phases' concurrency, the ceiling P of the receiver
//	minimal_new.sql     (b) the same guarantees in one autocommit statement
//	snippet_new.sql     (c) the copied snippet's two autocommit statements
//	snippet_new_tx.sql  (c1) the snippet's statements in one transaction
//
// (a) and (b) run on a database migrated like the receiver's, (c) and (c1)
// on the snippet's own tables (bench/snippetdb), as users run them.
//
// Scripts use the variable r (set in the script, random per transaction)
// and, when they store the event, body: benchrun passes a real-sized event
// body with -D body=… (see loadgen -print-body), so that it travels as a
// parameter as the receiver's does.
package pgbench

import (
	"embed"
	"strings"
)

//go:embed *.sql
var files embed.FS

// Script is one pgbench script.
type Script struct {
	ID    string // "a", "b", "c", "c1"
	File  string // file name in bench/pgbench
	Title string // what it runs, for the report
	Body  bool   // needs -D body=…
	// Snippet: runs on the snippet's own tables (bench/snippetdb); else on
	// the receiver's schema.
	Snippet bool
}

// Text is the script as pgbench reads it.
func (s Script) Text() string {
	b, err := files.ReadFile(s.File)
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	return string(b)
}

// SQL is the script without its leading comment.
func (s Script) SQL() string {
	var out []string
	for _, line := range strings.Split(s.Text(), "\n") {
		if len(out) == 0 && (strings.HasPrefix(line, "--") || strings.TrimSpace(line) == "") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

var (
	ReceiverNew  = Script{"a", "receiver_new.sql", "the receiver's transaction (pipelined, one round trip): the ceiling P", true, false}
	MinimalNew   = Script{"b", "minimal_new.sql", "the minimal transaction: one statement, autocommit", true, false}
	SnippetNew   = Script{"c", "snippet_new.sql", "the snippet's SQL on its own tables: two autocommit statements, no body", false, true}
	SnippetNewTx = Script{"c1", "snippet_new_tx.sql", "the snippet's SQL on its own tables in one transaction, no body", false, true}
)
