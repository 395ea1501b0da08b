package jobnet_test

import (
	"testing"

	"github.com/scrfs/scrfs/internal/testutil"
)

func TestMain(m *testing.M) { testutil.LeakCheckMain(m, "scrfs/jobnet") }
