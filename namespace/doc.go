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
// A file another node holds is copied into this node's read cache from
// its holder over the job's authenticated links: whole when it is opened
// if it is at most FetchWhole bytes, else as it is read (Open, Remote):
// the blocks a read covers, and while reads go in order a growing window
// after them. The holder checks the whole file against the CRC32C its
// redundancy file recorded when the dataset was protected (or, under
// SINGLE, only computes it) — as it sends a whole file, or before it
// serves any range of one — and every piece carries its own CRC32C,
// checked before a reader sees it, so no reader ever sees a wrong byte.
// Readers of one file on one node share its transfer; the read cache is
// bounded (least recently used complete copies go first) and dropped with
// its dataset. A holder that is down is waited for, at most MemberTimeout
// (it may come back, or a replacement be rebuilt), then the read fails;
// under PARTNER the file comes whole from a partner's copy meanwhile.
//
// It talks to the rest of the daemon only through what New is given and
// imports neither fs nor the other protocols.
package namespace
