package main

import (
	"io"
	"strconv"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// jobID names the benchmark's job; it is part of the cache paths.
const jobID = "redbench"

// newCluster lays out n daemons under work that form one redundancy set
// with scheme sch; nothing runs until Start.
func newCluster(bin, work string, n, port int, sch scheme, settings []string, echo io.Writer) (*job.Cluster, error) {
	common := append([]string{
		// Only the marker completes a dataset, and only the newest stays
		// in cache: the previous one is evicted as the next completes, so
		// /dev/shm holds at most two checkpoints and a restart rebuilds one.
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE",
		"SCRFS_DATASETS_CACHE_SIZE=1",
		"SCRFS_FLUSH_EVERY=0",
		"SCRFS_REDUNDANCY_SET_SIZE=" + strconv.Itoa(n),
		"SCRFS_RESTART_MEMBER_TIMEOUT=60s",
	}, sch.env()...)
	return job.New(job.Spec{Bin: bin, Dir: work, Nodes: n, Port: port, JobID: jobID,
		Settings: append(common, settings...), Echo: echo})
}

// selfCPU returns this process's CPU time (user+system) so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
