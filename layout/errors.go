package layout

import "errors"

// Sentinel errors. Every error this package returns wraps exactly one of
// them, so callers can tell a malformed input from a layout that does not fit
// the configured scheme with errors.Is, while the message names the offending
// text.
var (
	// ErrNodelist reports a malformed Slurm node list (unbalanced brackets,
	// empty elements, descending ranges, an expansion that is too large).
	ErrNodelist = errors.New("invalid node list")

	// ErrAddress reports a node entry that is not host or host:port with a
	// valid port, or a default port outside 1..65535.
	ErrAddress = errors.New("invalid node address")

	// ErrDuplicate reports the same host:port listed twice.
	ErrDuplicate = errors.New("duplicate node")

	// ErrDomain reports a malformed failure domain, or domains of mixed
	// depth within one job.
	ErrDomain = errors.New("invalid failure domain")

	// ErrNodes reports an unusable node set for Build: no nodes, a negative
	// or repeated node index, or a set size below 1.
	ErrNodes = errors.New("invalid nodes")

	// ErrScheme reports a redundancy scheme whose parameters do not fit the
	// size of the redundancy sets (see CheckScheme).
	ErrScheme = errors.New("redundancy scheme does not fit")

	// ErrFileName reports a name that is not a redundancy file name as
	// RedundancyFileName produces it.
	ErrFileName = errors.New("not a redundancy file name")
)
