// Command scrfs runs and steers the scrfs checkpoint cache file system.
//
//	scrfs mount [flags] MOUNTPOINT   run the daemon (foreground) on MOUNTPOINT
//	scrfs status [--json]            show datasets and the node's state
//	scrfs complete NAME              mark a dataset complete
//	scrfs flush [--wait] [NAME]      copy a dataset to the prefix directory
//	scrfs list [--json]              show the datasets the prefix holds
//	scrfs layout                     show redundancy sets and what they tolerate
//	scrfs config                     print the effective configuration
//	scrfs version                    print the version
//
// docs/cli.md describes every command, flag, exit code and JSON schema.
// One more command is not listed there nor in scrfs help: `scrfs
// mount-guard PID CONN`, the mount's guard process, which `scrfs mount`
// starts itself (cmd_guard.go).
package main

import "os"

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}
