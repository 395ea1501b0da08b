package control

import "time"

// SocketName is the control socket's file name inside the control directory.
const SocketName = "control.sock"

// Status is the answer to GET /v1/status.
type Status struct {
	Node     Node      `json:"node"`
	Datasets []Dataset `json:"datasets"`
	// Failed lists recently failed datasets (they are no longer in cache).
	Failed []Dataset `json:"failed"`
	Peers  []Peer    `json:"peers"`
}

// Node describes the daemon and its cache.
type Node struct {
	Index      int       `json:"index"`
	Nodes      int       `json:"nodes"`
	Hostname   string    `json:"hostname"`
	PID        int       `json:"pid"`
	Version    string    `json:"version"`
	Job        string    `json:"job"`
	Mountpoint string    `json:"mountpoint"`
	CacheDir   string    `json:"cache_dir"`
	ControlDir string    `json:"control_dir"`
	Prefix     string    `json:"prefix,omitempty"`
	Started    time.Time `json:"started"`
	Uptime     float64   `json:"uptime_seconds"`
	// DataPath is "passthrough" when reads and writes bypass the daemon,
	// "daemon" otherwise.
	DataPath string `json:"data_path"`
	// RedundancyPath is how encodes and rebuilds move data: "zerocopy"
	// (spliced) or "copy" (through buffers).
	RedundancyPath string `json:"redundancy_path"`
	Scheme         string `json:"scheme"`
	CacheSize      int    `json:"cache_size"`
	Cache          Cache  `json:"cache"`
	Metrics        string `json:"metrics,omitempty"` // metrics address, "" if disabled or unavailable
	Ready          bool   `json:"ready"`
	// ReadOnly is set while the daemon cannot write its state into the
	// control directory (full, over quota, read-only or failing): it
	// serves every dataset it holds, refuses new ones with ENOSPC, and
	// leaves this condition by itself at the first write that succeeds.
	ReadOnly *ReadOnly `json:"read_only,omitempty"`
	// Restored says which checkpoint the job restored at this daemon's
	// start, and from where; absent before the restore has decided.
	Restored *Restored `json:"restored,omitempty"`
	// Fetching is this node's part of a fetch from the prefix while it
	// copies (at a start, the mount's lookups wait for it).
	Fetching *Fetching `json:"fetching,omitempty"`
	// TakingStock is set on node 0 while the job takes stock (verifies
	// every node's datasets, rebuilds, fails or revives them): the
	// states shown may change when it ends.
	TakingStock bool `json:"taking_stock,omitempty"`
}

// Fetching is a node's part of a fetch from the prefix.
type Fetching struct {
	Dataset        string  `json:"dataset"`
	DoneBytes      int64   `json:"done_bytes"`
	TotalBytes     int64   `json:"total_bytes"`
	BytesPerSecond float64 `json:"bytes_per_second"`
}

// Restored is the checkpoint a restart restored.
type Restored struct {
	// Dataset is its name; "" when the job restored none.
	Dataset string `json:"dataset,omitempty"`
	// From is "cache" (it survived in the caches, rebuilt where a member
	// was lost), "prefix" (fetched) or "none".
	From string `json:"from"`
	// Reason says why from there: why a fetch, why nothing.
	Reason string `json:"reason,omitempty"`
}

// ReadOnly says why and since when a daemon's cache is read-only.
type ReadOnly struct {
	Since time.Time `json:"since"`
	// Reason is "no_space", "quota", "read_only_fs" or "error" (the
	// reason label of scrfs_cache_read_only).
	Reason string `json:"reason"`
	// Error is the last failed write of the state, with the path.
	Error string `json:"error"`
	// FailedWrites counts the writes that failed since Since; the daemon
	// tries again on every change and every few seconds.
	FailedWrites int `json:"failed_writes"`
}

// Cache is the cache file system's usage.
type Cache struct {
	UsedBytes      int64 `json:"used_bytes"`
	CapacityBytes  int64 `json:"capacity_bytes"`
	AvailableBytes int64 `json:"available_bytes"`
}

// Dataset is one dataset in the cache.
type Dataset struct {
	Name       string    `json:"name"`
	State      string    `json:"state"`
	Files      int64     `json:"files"`
	Bytes      int64     `json:"bytes"`
	ID         uint64    `json:"id"`
	Kind       string    `json:"kind"`
	Root       string    `json:"root"`
	Created    time.Time `json:"created"`
	Completed  time.Time `json:"completed,omitzero"`
	Age        float64   `json:"age_seconds"`
	Reason     string    `json:"reason,omitempty"`
	Completing string    `json:"completing,omitempty"`
	OpenWrite  int       `json:"open_for_write"`
	Flush      *Flush    `json:"flush,omitempty"`
	Rebuild    *Progress `json:"rebuild,omitempty"` // a rebuild under way
	// Seq is the dataset's place in the job's completion order, once the
	// job agreed its record (0 before).
	Seq uint64 `json:"seq,omitempty"`
	// JobFiles and JobBytes count the files of every node, as every node
	// shows them once the dataset is recorded; SharedFiles the files
	// several nodes wrote (one file each, read from every writer's part).
	JobFiles    int64 `json:"job_files,omitempty"`
	JobBytes    int64 `json:"job_bytes,omitempty"`
	SharedFiles int   `json:"shared_files,omitempty"`
}

// Progress is how far a long operation has come.
type Progress struct {
	DoneBytes  int64     `json:"done_bytes"`
	TotalBytes int64     `json:"total_bytes"`
	Started    time.Time `json:"started"`
}

// Flush is a dataset's flush progress.
type Flush struct {
	State      string    `json:"state"`
	DoneBytes  int64     `json:"done_bytes"`
	TotalBytes int64     `json:"total_bytes"`
	Started    time.Time `json:"started,omitzero"`
	Finished   time.Time `json:"finished,omitzero"`
	Error      string    `json:"error,omitempty"`
	// Rate is this node's copy rate over the last few seconds, in bytes
	// per second, and ETA the seconds left at that rate; both 0 when no
	// copy is running.
	Rate float64 `json:"rate_bytes_per_second,omitempty"`
	ETA  float64 `json:"eta_seconds,omitempty"`
	// Waiting is set once this node's part is durable while other nodes
	// are still copying theirs.
	Waiting bool `json:"waiting,omitempty"`
}

// Peer is the state of the link to another node of the job.
type Peer struct {
	Index     int       `json:"index"`
	Addr      string    `json:"addr"`
	Up        bool      `json:"up"`
	Since     time.Time `json:"since,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// CompleteRequest asks for a dataset's completion (POST /v1/complete).
type CompleteRequest struct {
	Name string `json:"name"`
}

// Error is the body of every non-2xx answer.
type Error struct {
	Err   string `json:"error"`
	Errno int32  `json:"errno,omitempty"`
}

func (e *Error) Error() string { return e.Err }
