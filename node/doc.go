// Package node builds one scrfs node from its parts and restores it after
// a start: the one place where the node-local cache store, the job's
// message layer (jobnet.Mux) and the coordination protocols (completion,
// redundancy, transfer, namespace) are put together. The daemon builds
// its node here, and so does the in-process job harness (package
// node/nodetest), so a test restarts a node exactly as production does.
//
// # A dataset's life
//
// The protocols never call each other. Each acts on the store (it
// completes, records, protects, adopts, fails datasets), and the store
// reports what happened as events (cache.Event; the table in
// cache/events.go says when each is reported and who hears it). lifecycle.go
// is the one place that says which protocol acts on which event: to follow
// a checkpoint from the application's last close to the prefix, read it
// top to bottom.
//
// The mount (package fs) hears the store's events too, for the kernel's
// caches, and asks the job through the Node (Begin, Rename, the
// namespace) before it changes the job-wide namespace, with the
// application's request context: the store never waits on the network.
package node
