// Package namespace shows every node every completed dataset whole: the
// union of the trees every member wrote, as the dataset's record lists
// them, with each file read from the node that holds it.
//
// A view of a recorded dataset (record.View) answers lookups and listings from the
// record alone — no network round trip — with every entry's size, mode,
// owner and times as written. A path several members wrote follows one
// rule: a node sees its own copy; a node without one sees the copy of the
// member with the lowest node index. Directories are the union of the
// members'.
//
// A file another node holds is fetched whole into this node's read cache
// on first open (Materialize): streamed over the job's authenticated links
// from its holder, checked against the CRC32C the holder's redundancy file
// recorded when the dataset was protected (or, under SINGLE, the one it
// computes as it reads), and only then served, so no reader ever sees a
// wrong byte. Readers of one file on one node share one transfer; the read
// cache is bounded (least recently used files go first) and dropped with
// its dataset. A holder that is down is waited for, at most MemberTimeout
// (it may come back, or a replacement be rebuilt), then the read fails.
//
// It talks to the rest of the daemon only through what New is given and
// imports neither fs nor the other protocols.
package namespace
