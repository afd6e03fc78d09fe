package reconcile_test

import (
	"testing"

	"github.com/paywebhooks/receiver/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
