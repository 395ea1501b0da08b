package main

// Exit codes are part of the CLI's stable interface (docs/cli.md).
const (
	exitOK       = 0
	exitError    = 1 // the operation failed; the message says why
	exitUsage    = 2 // bad command line
	exitConfig   = 3 // the configuration does not load or validate
	exitNoDaemon = 4 // no daemon answers on the control socket
	exitMount    = 5 // the daemon could not start or mount
	exitNotFound = 6 // the named dataset does not exist
	exitUnsafe   = 7 // a cache or control directory (or a file in one) is not safe to use: another user could control it
)
