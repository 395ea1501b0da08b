// Package names makes the names inside a dataset being written job-wide:
// a directory or file created on any node exists on every node before the
// call that created it returns, while the bytes stay in the cache of the
// node that writes them. MPI-IO and parallel HDF5 have rank 0 create one
// shared file that the other ranks then open; frameworks have rank 0 make
// nested directories the others write into. Neither works if a node sees
// only what was created on it.
//
// # Owners
//
// Every path of a writing dataset has an owner node, chosen by hash of the
// path inside the dataset (Owner), as in GekkoFS and UnifyFS: no create is
// broadcast, and no single node sees every create or lookup of the job.
// The owner keeps the path's entry (type, mode, symlink target) and which
// nodes hold a local copy of it (holders: the node that created it, and
// those that looked it up or opened it since). A dataset renamed while it
// is written keeps its owners, since the hash does not take its name.
//
// A node asks the owner
//
//   - when the application creates an entry (create: a second create of a
//     directory succeeds, as it must when several ranks make the same
//     directory at once; a second exclusive create of a file fails with
//     EEXIST, so exactly one node wins; a second create of a file makes
//     that node a holder too: the file is written on several nodes);
//   - when a lookup misses locally (lookup: the owner answers with the
//     entry, and the asking node makes its own copy of the name: a
//     directory, a symlink, or an empty file it has not written);
//   - when the application removes or renames an entry (remove, rename:
//     the owner tells every holder to do the same to its copy);
//   - when it lists a directory (list: every node answers with the
//     entries it owns there, along the job's fan-out tree).
//
// So a create costs one round trip to its owner (on a job of N nodes, a
// create is local for 1 path in N), a lookup that misses locally one more;
// a lookup of an entry this node holds, and every read and write, none.
//
// The tables live in memory only. A node that restarts while a dataset is
// written fails that dataset on every node anyway (its run that began the
// dataset is gone: see package completion), so nothing the tables held
// outlives what they were for. A table is dropped when its dataset is
// recorded or leaves the cache.
//
// An owner that does not answer fails the call after the job's member
// timeout (restart.member_timeout) with an error that names it; a call is
// never answered from a guess.
package names
