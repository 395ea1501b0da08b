// Package job runs a job of scrfs daemons for the benchmarks: each node a
// separate `scrfs mount` process on its own loopback address, with its own
// mount, cache and control directories, and its JSON log parsed into events
// the driver can wait on (readiness, "dataset complete", "dataset
// protected") with the daemons' own timestamps.
//
// It is shared by bench/redbench and bench/stall; the end-to-end tests have
// their own harness (e2e), which checks rather than times.
package job
