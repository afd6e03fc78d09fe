package pgtest

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// LeakOptions are what Main's check of goroutines ignores. A goroutine that
// outlives a package's tests is a bug (a server, pool, ticker, body or
// exporter nobody stopped or closed), except where a library leaves one
// behind on purpose or by a bug of its own that our code cannot reach:
// each is listed here with why.
var LeakOptions = []goleak.Option{
	// net/http's timer of a request made by an http.Client with a Timeout
	// (reconcile.NewClient's), which ends when the response body is closed
	// or the timeout fires. go-github's CheckResponse reads the body of an
	// error answer (a 401, a 404) and puts a copy in its place without
	// closing the original, so the timer outlives the test by up to
	// reconcile.RequestTimeout; the connection itself is released (the body
	// was read to its end).
	goleak.IgnoreTopFunction("net/http.setRequestCancel.func4"),
}

// checkLeaks runs goleak over the goroutines left once a package's tests
// (status code) passed and its server stopped, and returns 1 if any is
// left, printing it; otherwise code.
func checkLeaks(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(LeakOptions...); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: goroutines still running after the tests passed (goleak):\n%v\n", err)
		return 1
	}
	return code
}
