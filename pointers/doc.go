// Package pointers makes the pointer files at the mount root the job's.
// Frameworks keep them beside their checkpoints — DeepSpeed's latest (the
// name of the newest global_stepN directory), Megatron-LM's
// latest_checkpointed_iteration.txt, Lightning's last.ckpt link — and read
// them at restart to find the checkpoint to load, on any node.
//
// A change on any node (a file written and closed, a symlink made, a file
// removed or renamed) goes to node 0, which tags it with the newest
// dataset (the one being written, or the newest complete) and tells every
// node, the changing one included, before the call returns: every node's
// store then shows the pointer files as they are now, and keeps them
// with that dataset (cache.Store.ChangePointers). They are flushed and
// fetched with it.
//
// At a start the pointer files shown are those kept with the newest
// checkpoint the job restored (Restore, again whenever another is
// recorded or leaves the cache), until the application changes one: so a
// pointer never names a checkpoint newer than the one restored — when the
// newest failed and an older one is restored, so are its pointer files.
//
// Node 0 owns them: a change is one round trip to it and one fan-out to
// every node, along the job's tree. They are small (at most
// cache.MaxPointerSize each) and written once per checkpoint.
package pointers
