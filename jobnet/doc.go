// Package jobnet is the message layer the coordination protocols of a job
// speak over: calls (a request and its answer) and streams (ordered, reliable
// byte messages for bulk data) between the daemons of one job, addressed by
// node index.
//
// A Transport moves the bytes: package peernet adapts the authenticated TCP
// links of package peer (jobnet itself never imports it), and package
// memnet is an in-memory Transport with injectable faults for tests that
// run several nodes in one process. A Mux sits on top:
// it holds the protocols' handlers by request kind, each protocol in a
// namespace of its own (Mux.Protocol: the kind "begin" of protocol
// "completion" travels as "completion.begin", and a name or kind
// registered twice panics at start), encodes requests and
// answers as JSON, dispatches calls to this node's own index locally (so a
// job of one node runs the same protocol without a network), and carries
// errors across nodes with a code, so that a sentinel error such as
// cache.ErrNotFound on the answering node is still errors.Is-able on the
// asking one. Fanout sends one request to many nodes along a tree of
// width DefaultWidth, so that what any one node sends and answers does not
// grow with the job.
//
// jobnet knows nothing of datasets, schemes or the prefix directory.
package jobnet
