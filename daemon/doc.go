// Package daemon wires scrfs together and runs it: it loads nothing itself
// (the caller hands it a validated config), opens the cache store, mounts
// the file system, serves the control socket and the Prometheus endpoint,
// and reacts to the store's events (completion, removal). Run returns once
// its context is cancelled and everything is shut down in order: control
// and metrics stop, the mount is unmounted (lazily if busy), the store
// closes.
package daemon
