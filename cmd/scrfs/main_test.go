package main

import (
	"testing"

	"github.com/scrfs/scrfs/internal/testutil"
)

// A package main's frames are named main.f: its goroutines are told by
// the directory of their files.
func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "/cmd/scrfs/") }
