// Package transfer moves datasets between the job and the prefix directory
// on the parallel file system (SCR's stage-out and stage-in): node 0's flush
// rounds, every node's part of a round, resuming rounds a crash interrupted,
// and the fetch of the newest usable checkpoint when a job starts with
// nothing in its cache. Package prefix does the file-level I/O; this package
// decides who copies what, when, and what the job-wide outcome is.
//
// Contract. The prefix's index never calls a dataset complete unless every
// node's part of it is durable there; a round first stops every node's copy
// of an earlier round of the same dataset before it touches the prefix; no
// node stays "flushing" because its coordinator went away (it asks node 0
// after Options.RoundCheck, and is told the outcome or gets a new round); a
// fetch is all or nothing across the job and falls back to an older dataset,
// recording the failure in the index, when a file is corrupt or missing.
// Every goroutine the package starts is owned by its Flusher and gone when
// Close returns.
//
// It talks to the rest of the daemon only through what New is given: the
// cache store as a narrow interface, through which it also reports a
// dataset the job fetched (Store.Fetched), and the job's jobnet.Mux; the
// node tells it of the store's events it acts on (Completed, Settled,
// Removed). It never imports fs, schemes or the daemon.
package transfer
