package fulfillment_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them (a
// server, connection or timer nobody stopped).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
