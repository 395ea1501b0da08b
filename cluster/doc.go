// Package cluster says who the job is made of: every node's peer address
// (from cluster.nodes, a hostfile or Slurm), this node's index, the
// redundancy sets formed over the failure domains, where this user's job
// keeps its cache and control directories, and the job's shared secret.
//
// It reads the configuration and the environment, never the network or the
// cache; the command line uses it for `scrfs layout` and to find the
// control socket without starting a daemon.
package cluster
