// Package daemon wires scrfs together and runs it: it loads nothing itself
// (the caller hands it a validated config), opens the cache store, creates
// the coordination protocols (packages redundancy and transfer) on one
// jobnet.Mux, starts the peer endpoint, serves the control socket and the
// Prometheus endpoint, mounts the file system and restores the newest
// checkpoint before it reports ready. The protocols reach each other only
// through the callbacks wired here. Run returns once its context is
// cancelled and everything is shut down in order: the mount is unmounted
// (lazily if busy), control and metrics stop, the peer endpoint closes, the
// protocols' goroutines are waited for, and the store closes.
package daemon
