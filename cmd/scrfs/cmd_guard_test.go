package main

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestMountGuardCommand: `scrfs mount-guard` is not in scrfs help, refuses
// a bad command line, and ends quietly once its daemon has exited.
func TestMountGuardCommand(t *testing.T) {
	var out, errb bytes.Buffer
	Main([]string{"help"}, &out, &errb)
	if strings.Contains(out.String(), guardCommand) {
		t.Errorf("scrfs help lists the hidden %s:\n%s", guardCommand, out.String())
	}
	for _, args := range [][]string{{guardCommand}, {guardCommand, "x", "1"}, {guardCommand, "0", "1"}} {
		if code := Main(args, &out, &errb); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (usage)", args, code, exitUsage)
		}
	}
	daemon := exec.Command("true")
	if err := daemon.Run(); err != nil {
		t.Skipf("no true to stand for a daemon: %v", err)
	}
	errb.Reset()
	if code := Main([]string{guardCommand, strconv.Itoa(daemon.Process.Pid), "0"}, &out, &errb); code != exitOK || errb.Len() > 0 {
		t.Errorf("guard of an exited daemon: exit %d, stderr %q; want 0 and nothing", code, errb.String())
	}
}
