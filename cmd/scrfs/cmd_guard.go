package main

import (
	"strconv"

	"github.com/scrfs/scrfs/fs/mount"
)

// guardCommand is the hidden command `scrfs mount-guard PID CONN`: the
// guard of a mount (see package fs/mount), which `scrfs mount` starts for
// its mount with its own pid and the mount's FUSE connection, and which
// aborts that connection if the daemon is killed but held in the kernel.
// Nobody runs it by hand, so neither scrfs help nor docs/cli.md lists it.
const guardCommand = "mount-guard"

func runMountGuard(e *env, args []string) int {
	if len(args) != 2 {
		e.errorf("usage: scrfs %s PID CONN", guardCommand)
		return exitUsage
	}
	pid, perr := strconv.Atoi(args[0])
	conn, cerr := strconv.Atoi(args[1])
	if perr != nil || cerr != nil || pid <= 0 {
		e.errorf("%s: bad daemon pid or connection %q", guardCommand, args)
		return exitUsage
	}
	aborted, err := mount.Guard(pid, conn)
	switch {
	case err != nil:
		e.errorf("%v", err)
		return exitError
	case aborted:
		e.errorf("daemon %d was killed and is held in the kernel: aborted its FUSE connection %d", pid, conn)
	}
	return exitOK
}
