package pgtest

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// LeakOptions are what VerifyNone and Main's check of goroutines ignore:
// nothing yet. A goroutine that outlives a package's tests is a bug (a
// server, pool, ticker or exporter nobody stopped), except for the few
// background goroutines a library starts once per process and never stops:
// each is listed here with why.
var LeakOptions = []goleak.Option{}

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
