// Package daemon runs scrfs on one node: it loads nothing itself (the
// caller hands it a validated config), opens the cache store, builds the
// node (package node: the coordination protocols, wired through the
// store's events), starts the peer endpoint, serves the control socket and
// the Prometheus endpoint, mounts the file system and has the node restore
// the newest checkpoint before it reports ready. Run returns once its
// context is cancelled and everything is shut down in order: the
// applications' calls waiting on the job are let go, the mount is
// unmounted (lazily if busy), control and metrics stop, the peer endpoint
// closes, the protocols' goroutines are waited for, and the store closes.
package daemon
