// Command redbench measures scrfs's redundancy schemes with real daemons:
// how long after a checkpoint completes it is protected, against what the
// network and the encoder allow on the same machine in the same run, how
// much memory a daemon needs, and how long a set takes to rebuild a lost
// node (issues 3 and 4 of the project).
//
//	go run ./bench/redbench [-size 1GiB] [-small 256MiB] [-nodes 4] [-rounds 3]
//	                        [-schemes partner,xor,rs] [-replicas 1] [-parity 2]
//	                        [-dir /dev/shm] [-bin PATH] [-rebuild=true] [-fetch=true]
//	                        [-disk /tmp] [-s3] [-v]
//	go run ./bench/redbench -bin A -ab B [-ab-set SCRFS_…=…] [-size 256MiB] [-rounds 6] …
//
// It builds cmd/scrfs, starts -nodes daemons on 127.0.0.1, 127.0.0.2, … as
// separate processes (one redundancy set, caches and control directories
// under -dir), and for each scheme and each checkpoint size:
//
//  1. measures the network bound (a): the bytes the scheme moves between
//     every pair of nodes (worked out from the algorithms in
//     docs/formats-redundancy.md), pushed over loopback TCP by one plain
//     process per node (this program, re-executed in a hidden "netnode"
//     mode: package bench/internal/netbound) with a sender and a receiver goroutine per direction of each
//     pair, all at once, 1 MiB writes; the same in this one process, for
//     reference; and (c), (a) while every node also reads its checkpoint from
//     a file and writes its redundancy share to a new one in -dir: all the
//     bytes the scheme must move, by plain goroutines; for XOR also (c′)
//     and (d), in turn with (c) round by round, both on checkpoints
//     written just before: (c′) is (c) with the CRC32C of every byte read
//     and written (netbound.Local.WithChecks), the least any encode with
//     scrfs's checks costs whatever its algorithm; (d) is XOR's ring
//     itself by plain goroutines, with the CRC32Cs and the XOR scrfs's
//     encode does (netbound.XORRing), the least XOR's encode costs on
//     this machine;
//  2. writes one file of SIZE per node through the daemons' mounts with 1 MiB
//     writes from a reused buffer, completes the dataset with a marker on
//     node 0, and takes the time to protected from the daemons' own JSON log
//     lines: the latest "dataset protected" minus the earliest "dataset
//     complete" across the nodes (an untimed warm-up round first, then the
//     median of -rounds), with the daemons' own encode time, their CPU time
//     (/proc/PID/stat) and the bytes they report sending;
//  3. reads each daemon's peak RSS (VmHWM in /proc/PID/status) after the last
//     protect, for the small and the full size, to show it does not grow with
//     the checkpoint;
//  4. at the full size (-fetch), flushes the last checkpoint to a prefix in
//     -disk (with -s3: to S3, a versitygw on loopback serving -disk, and the
//     baseline is the AWS SDK's transfer manager instead of cp -r,
//     bench/s3bound), stops and wipes every daemon, drops the page cache, starts them
//     again and times the fetch with its re-protect from node 0's "fetching
//     from the prefix" line to the latest "dataset protected", and the fetch
//     alone to the latest "dataset fetched" (with the daemons' CPU at that
//     point, so the report can say what least time the two take together on
//     this machine's cores), beside cp -r of the same files into -dir plus
//     one encode; for XOR, as root, also (f0) and (f) with the bounds: a
//     fetch from a copy on -disk by plain goroutines, alone and feeding
//     (d)'s ring the bytes as they land (netbound.Local.WithFetch), the
//     floor under fetch + protect ÷ fetch alone;
//  5. at the full size, SIGKILLs one node (for RS also k at once), wipes its cache and
//     control directories, starts a replacement with the same node index and
//     times the rebuild from the replacement's "rebuilding dataset" line to
//     its "dataset rebuilt" line; then checks the sha256 of the rebuilt file
//     read through the replacement's mount against the sum computed while
//     writing.
//
// Before the daemons it measures (b), the in-process encode rate on one core:
// klauspost/reedsolomon EncodeIdx (what the RS daemons run) and
// crypto/subtle.XORBytes (what the XOR daemons run) over the same number of
// bytes. At the end it prints one table per question and the ratios the
// project's targets are stated in. The run fails (exit 1) when a dataset is
// degraded, a rebuild does not finish or a rebuilt file's sum differs.
//
// With -ab it compares two builds (or, with -ab-set, two settings) instead:
// a job of daemons for each, side by side, taking turns round by round
// (encodes, then rebuilds), and prints both sides' medians and the median
// of the per-round ratios B ÷ A, which a load that others vary on a shared
// machine moves far less than it moves two separate runs.
package main
