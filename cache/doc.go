// Package cache owns the node-local store of checkpoint datasets.
//
// A dataset is what one checkpoint wrote on this node. Its files live under
// <cache dir>/<name>/ with the tree the application wrote; scrfs keeps its own
// metadata and redundancy files in <name>/.scrfs/. The store tracks every
// dataset's state machine
//
//	writing → complete → protected | degraded   (and failed, with a reason, from any state)
//
// plus its flush status, persists that state in the control directory so a
// daemon killed with SIGKILL comes back with every completed dataset intact,
// decides when a dataset is complete (the configured completion rules, and
// only once no file of it is open for writing), and evicts the oldest
// completed datasets beyond the configured cache size.
//
// The package knows nothing of FUSE or the network: the fs package reports
// opens, closes and new entries; the daemon reacts to completions and
// removals through the hooks in Options.
package cache
