// Package netbound measures what the machine allows for moving bytes
// between the nodes of a job over loopback TCP, with nothing else to do:
// the bounds the benchmarks compare the daemons with. A Traffic matrix is
// pushed either between plain sockets of one process (InProc) or by one
// process per node (Procs: the benchmark re-executes itself with NodeArg,
// so the bound pays for the same process and thread switching as daemons
// sharing the machine's cores), optionally with each node reading a file
// and writing another (Local) at the same time, or, for XOR, coupled into
// the scheme's ring with its CRC32Cs and XOR (XORRing).
//
// It is shared by bench/redbench (the bound of each redundancy scheme) and
// bench/nsbench (one stream between two processes, beside a remote read
// through the mounts).
package netbound

// Traffic[src][dst] is the number of payload bytes node src sends node
// dst.
type Traffic [][]int64

// Stream returns the Traffic of one stream of n bytes from node 0 to node
// 1.
func Stream(n int64) Traffic { return Traffic{{0, n}, {0, 0}} }
