package main

import (
	"os"
	"testing"

	"github.com/minictl/minictl/internal/minitest"
)

// TestMain ends every process the tests start, also when a test hangs
// until the -timeout, and fails the run if one outlives the tests.
func TestMain(m *testing.M) { os.Exit(minitest.Main(m)) }
