// Package peer carries bytes between the scrfs daemons of one job over TCP.
//
// Every daemon runs one Node: it listens on its own host:port and dials the
// others. peer knows nothing of what the bytes mean (datasets, schemes); it
// offers two ways to move them:
//
//   - Request/response (Handle, Call) over one persistent link per peer. The
//     link is dialled on first use or by Connect, heartbeated, and redialled
//     with capped exponential backoff and jitter after failures. Links and
//     LinkStatus are what `scrfs status` shows.
//   - Streams (OpenStream, AcceptStream): a dedicated TCP connection per bulk
//     transfer, so a multi-GiB encode never queues behind control messages.
//     The opener dials; the acceptor waits for it by (peer, id), whichever
//     comes first.
//
// # Authentication
//
// Every connection starts with a mutual challenge-response proving that both
// ends hold the job's shared secret:
//
//	client → server  Hello{"SCRFS", version, purpose, from, to, job, addr, stream id, terms, nonce_c}
//	server → client  Challenge{nonce_s, HMAC(secret, "server"‖hello‖nonce_s)}
//	client → server  Proof{HMAC(secret, "client"‖hello‖nonce_s)}
//	server → client  Verdict{accept | refuse + reason}
//
// The role labels stop a reflected MAC from passing for the other side's; the
// hello bytes (every field, both nonces) are the transcript. The client sends
// its proof even when the server's MAC is wrong, so that with a wrong secret
// both ends log the refusal; it never sends or accepts data unless both MACs
// verified. A wrong job id, protocol version or node index is refused before
// the MACs; other job terms (Config.Terms: the scheme, its parameters and
// the number of nodes the daemon runs the job with) right after them, so
// only a node holding the secret learns them. This authenticates the endpoints of a connection, not each frame:
// the bytes are neither encrypted nor per-frame authenticated, so a host that
// can inject into another's TCP streams is out of scope (use a private
// network, as HPC interconnects are).
//
// # Framing
//
// After the handshake everything is a frame: a 16-byte header (magic, type,
// flags, payload length, id) and a payload of at most Config.MaxFrame bytes.
// Lengths are checked against the limit before anything is allocated; before
// authentication the limit is a few KiB. Every read and write has a deadline.
// A peer that sends garbage, stalls or oversizes is dropped with a log line
// and counted in scrfs_peer_dropped_total.
//
// # Identity
//
// A node is its index. Its address may change (a spare takes over a dead
// node's index): every authenticated Hello carries the sender's advertised
// address, and when it differs from the one we had, the table is updated,
// the move logged and the link redialled at the new address.
package peer
