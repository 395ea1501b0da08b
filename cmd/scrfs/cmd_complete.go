package main

import "context"

func runComplete(e *env, args []string) int {
	fs := e.flags("complete")
	dir := fs.String("control", "", "the daemon's control directory (default: from the configuration)")
	file := fs.String("config", "", "configuration file, to find the control directory")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	c, ok := e.controlClient(*dir, *file)
	if !ok {
		return exitConfig
	}
	if err := c.Complete(context.Background(), fs.Arg(0)); err != nil {
		return e.exitFor(err)
	}
	return exitOK
}
