// Package layout holds the pure decisions of scrfs: which node is in which
// redundancy set, who holds whose copies or parity, how many failures a layout
// tolerates at each level of the failure-domain tree, and the names of every
// directory and file scrfs creates (cache, control, prefix, redundancy files).
//
// Nothing here does I/O or talks to the network, so every rule can be table
// tested and the same answer is computed on every node.
package layout
