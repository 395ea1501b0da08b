// Package completion makes a dataset's completion a job-wide fact: a
// dataset is complete only when every node that was part of the job while it
// was written has proven its share, and then every node holds the same
// record of it (package record) — its job-wide sequence number and time, the
// scheme and sets that protect it, and each member's share by identity.
//
// Node 0 coordinates. It keeps a ledger in its control directory: when it
// first heard of each node identity (a cache, kept across restarts, new
// when wiped), and which identity and daemon run (incarnation) began each
// dataset — every node asks node 0 before it creates a dataset the
// application starts (Begin, which the mount asks, through the node, before
// it asks the store). When a completion rule fires anywhere, or `scrfs
// complete` runs, node 0 asks every node for its share: the node
// completes the dataset locally (its files closed) and answers with its
// identity, the run that created its copy and its file list, or that it
// holds nothing, or that it lost its copy. A share stands when
//
//   - the node holds the dataset, created by a run that began it, and no
//     other run of the same identity ever began it (a run that crashed
//     halfway would have left files the node no longer has);
//   - or the node holds nothing, never began it, and node 0 knew the
//     identity before the dataset began (a wiped node cannot vouch for what
//     its former self wrote);
//   - and, for a node that could not be told the dataset began before it
//     started without it, the share comes from the daemon run node 0 knew
//     for it then (a run that replaced it cannot vouch for what the
//     application gave the one before).
//
// If every share stands, node 0 assigns the next sequence number, keeps
// the record with its own copy (so that, killed before the others hear of
// it, it sends the record on at its restart rather than fail a checkpoint
// its ledger no longer knows), forgets when the dataset began, and sends
// the record to every node, which keeps it with the dataset and tells the
// store (cache.Store.SetRecord: the store reports the dataset Recorded, and
// the node has it protected). Otherwise every node fails the
// dataset with the reason: nothing incomplete is ever protected, flushed or
// listed complete. Node 0 persists its ledger, so a round interrupted by its
// own restart is proven afterwards: nodes report their complete but
// unrecorded datasets when they join, and node 0 asks the running ones for
// them (and for their newest sequence number) when it starts, so a node 0
// that lost its ledger fails what it cannot prove and numbers new records
// after the job's newest.
//
// It talks to the rest of the daemon only through what New is given and
// never imports fs, schemes' operations, flush or the other protocols.
package completion
