package config

import (
	_ "embed"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// The struct tags below are the schema the loader works from: toml is the
// key, scr the SCR parameter it corresponds to (if any), and help the short
// meaning that validation errors repeat so a user need not open the manual.
// A key exists if and only if it has a field here; the embedded default.toml
// must set every one of them (a test checks).

// Config is the complete, effective configuration of one scrfs daemon or
// command. It is a plain value: the caller owns it, and nothing in this
// package keeps a reference.
type Config struct {
	Job        Job        `toml:"job"`
	Paths      Paths      `toml:"paths"`
	Datasets   Datasets   `toml:"datasets"`
	Fuse       Fuse       `toml:"fuse"`
	Metrics    Metrics    `toml:"metrics"`
	Control    Control    `toml:"control"`
	Log        Log        `toml:"log"`
	Cluster    Cluster    `toml:"cluster"`
	Redundancy Redundancy `toml:"redundancy"`
	Flush      Flush      `toml:"flush"`
	Fetch      Fetch      `toml:"fetch"`
	Restart    Restart    `toml:"restart"`
	Namespace  Namespace  `toml:"namespace"`
	Prefix     Prefix     `toml:"prefix"`
}

// Job identifies the job and holds the secret its daemons authenticate with.
type Job struct {
	// ID becomes part of directory names; Load fills "" from SLURM_JOB_ID,
	// else "local".
	ID string `toml:"id" scr:"allocation id" help:"job identifier used in directory names"`
	// SecretFile holds the job secret; "" means <prefix>/.scrfs/secret.
	SecretFile string `toml:"secret_file" help:"file holding the job secret"`
	// Secret is the job secret itself, usually from SCRFS_JOB_SECRET. TOML()
	// never prints it.
	Secret string `toml:"secret" redact:"true" help:"job secret shared by the daemons of the job"`
}

// Paths names the three directories scrfs uses.
type Paths struct {
	CacheBase   string `toml:"cache_base" scr:"SCR_CACHE_BASE" help:"node-local directory for cached datasets"`
	ControlBase string `toml:"control_base" scr:"SCR_CNTL_BASE" help:"node-local directory for daemon state"`
	// Prefix is the parallel-file-system directory, or S3-compatible
	// object storage as "s3://bucket/path"; "" disables flush and fetch.
	Prefix string `toml:"prefix" scr:"SCR_PREFIX" help:"directory or s3://bucket/path to flush to and fetch from"`
}

// Datasets says how files are grouped into datasets and when one is complete.
type Datasets struct {
	// Match is an RE2 expression with a named group "dataset"; see MatchRegexp.
	Match string `toml:"match" help:"regular expression that picks the dataset from a path"`
	// Complete lists completion rules; see CompleteRules.
	Complete  []string `toml:"complete" help:"rules that mark a dataset complete"`
	CacheSize int      `toml:"cache_size" scr:"SCR_CACHE_SIZE" help:"completed checkpoints kept in cache"`
}

// Passthrough values of Fuse.Passthrough.
const (
	PassthroughAuto = "auto"
	PassthroughOn   = "on"
	PassthroughOff  = "off"
)

// Mount values of Fuse.Mount.
const (
	MountAuto       = "auto"
	MountDirect     = "direct"
	MountFusermount = "fusermount"
)

// Fuse tunes the FUSE mount.
type Fuse struct {
	// Mount is how the file system is mounted: "direct" is mount(2), which
	// needs root; "fusermount" runs fusermount3; "auto" picks direct as root.
	Mount           string   `toml:"mount" help:"how the file system is mounted"`
	Passthrough     string   `toml:"passthrough" help:"kernel passthrough of reads and writes to cache files"`
	MaxWrite        Size     `toml:"max_write" help:"largest write request the kernel sends"`
	EntryTimeout    Duration `toml:"entry_timeout" help:"how long the kernel caches name lookups"`
	AttrTimeout     Duration `toml:"attr_timeout" help:"how long the kernel caches file attributes"`
	NegativeTimeout Duration `toml:"negative_timeout" help:"how long the kernel caches failed lookups"`
	AllowOther      bool     `toml:"allow_other" help:"let other users access the mount"`
	Debug           bool     `toml:"debug" help:"log every FUSE request"`
	// TrustMountpoint accepts a mountpoint that is a symbolic link or
	// belongs to another user, which is otherwise refused (root too).
	TrustMountpoint bool `toml:"trust_mountpoint" help:"accept a mountpoint that is a symbolic link or belongs to another user"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen is host:port; "" disables the endpoint.
	Listen string `toml:"listen" help:"address of the Prometheus metrics endpoint"`
	// Pprof serves Go profiles under /debug/pprof/ on the same listener;
	// off by default, since anyone who reaches the port could read them.
	Pprof bool `toml:"pprof" help:"serve Go profiles under /debug/pprof/ on the metrics listener"`
}

// Control configures who may use the daemon's control socket.
type Control struct {
	// AllowRoot lets root steer a daemon run by another user; the daemon's
	// own user always may.
	AllowRoot bool `toml:"allow_root" help:"let root use the control socket of a daemon run by another user"`
}

// Log configures the daemon's log output.
type Log struct {
	Level  string `toml:"level" help:"least severe level logged"`
	Format string `toml:"format" help:"log line format"`
}

// Cluster lists the job's nodes and how their daemons talk.
type Cluster struct {
	// Nodes are "host:port" or "host" (which gets Port); see NodeAddrs.
	Nodes    []string `toml:"nodes" help:"the job's nodes in order"`
	Hostfile string   `toml:"hostfile" help:"file listing the job's nodes, one per line"`
	// NodeIndex is this node's position in Nodes; -1 means work it out.
	NodeIndex int    `toml:"node_index" help:"this node's position in the node list"`
	Port      int    `toml:"port" help:"peer port of nodes given without one"`
	Listen    string `toml:"listen" help:"address the peer listener binds"`
	// FailureDomains[i] is the domain path ("rack1/enc2") of node i.
	FailureDomains []string `toml:"failure_domains" help:"failure domain of each node"`
	ConnectTimeout Duration `toml:"connect_timeout" help:"how long to wait for peers at start"`
	IOTimeout      Duration `toml:"io_timeout" help:"how long a peer may stay silent during a transfer"`
	Heartbeat      Duration `toml:"heartbeat" help:"interval of peer liveness messages"`
}

// Scheme values of Redundancy.Scheme.
const (
	SchemeAuto    = "auto"
	SchemeSingle  = "single"
	SchemePartner = "partner"
	SchemeXOR     = "xor"
	SchemeRS      = "rs"
)

// Redundancy chooses the redundancy scheme and its parameters.
type Redundancy struct {
	Scheme    string   `toml:"scheme" scr:"SCR_COPY_TYPE" help:"redundancy scheme"`
	SetSize   int      `toml:"set_size" scr:"SCR_SET_SIZE" help:"nodes per redundancy set"`
	Replicas  int      `toml:"replicas" help:"full copies kept by the partner scheme"`
	Parity    int      `toml:"parity" help:"checksum chunks per member for the rs scheme"`
	Timeout   Duration `toml:"timeout" help:"how long a set waits for a member to be ready"`
	PieceSize Size     `toml:"piece_size" help:"unit of pipelined redundancy transfers"`
}

// Flush configures copying datasets to the prefix directory.
type Flush struct {
	Every     int  `toml:"every" scr:"SCR_FLUSH" help:"flush every Nth completed dataset, 0 = never"`
	Async     bool `toml:"async" scr:"SCR_FLUSH_ASYNC" help:"flush in the background"`
	Bandwidth Size `toml:"bandwidth" scr:"SCR_FLUSH_ASYNC_BW" help:"flush bandwidth limit in bytes per second, 0 = unlimited"`
	Streams   int  `toml:"streams" help:"parallel copy streams per node"`
	CRC       bool `toml:"crc" scr:"SCR_CRC_ON_FLUSH" help:"record and check a CRC32C per flushed file"`
}

// Fetch configures restoring datasets from the prefix directory.
type Fetch struct {
	Enabled bool `toml:"enabled" scr:"SCR_FETCH" help:"fetch the newest complete dataset when the cache cannot be rebuilt"`
}

// Namespace configures how every node shows every completed dataset.
type Namespace struct {
	// ReadCache bounds the other nodes' files kept here after a read: a
	// size ("8GiB") or a share of the cache file system ("25%").
	ReadCache string `toml:"read_cache" help:"how much of other nodes' files a node keeps after reading them"`
	// FetchWhole is the size up to which another node's file is fetched
	// whole when it is opened; a larger one is fetched block by block as
	// it is read.
	FetchWhole Size `toml:"fetch_whole" help:"other nodes' files up to this size are fetched whole when opened, larger ones as they are read"`
}

// ReadCacheBytes returns namespace.read_cache in bytes, for a cache file
// system of capacity bytes; an invalid value gives 0 (Validate reports it).
func (c *Config) ReadCacheBytes(capacity int64) int64 {
	if pct, ok := strings.CutSuffix(c.Namespace.ReadCache, "%"); ok {
		n, err := strconv.ParseFloat(pct, 64)
		if err != nil {
			return 0
		}
		return int64(float64(capacity) * n / 100)
	}
	s, err := ParseSize(c.Namespace.ReadCache)
	if err != nil {
		return 0
	}
	return int64(s)
}

// Restart configures what happens when a job restarts.
type Restart struct {
	FromCache     bool     `toml:"from_cache" scr:"SCR_DISTRIBUTE" help:"restart from datasets that survive in cache"`
	MemberTimeout Duration `toml:"member_timeout" help:"how long a rebuild waits for set members, a read for a node that is down, and the mount at a start for the restore (without progress)"`
}

//go:embed default.toml
var defaultTOML []byte

// Default returns a new Config holding the built-in defaults, decoded from
// the embedded default.toml (the same text docs/configuration.md shows, so
// code and documentation cannot drift). Each call returns a fresh value the
// caller may modify. The result validates; job.id is "" until Load resolves it.
func Default() *Config {
	c := &Config{}
	if errs := applyFile(c, "(built-in default.toml)", defaultTOML, nil); len(errs) > 0 {
		// Only a broken build can get here; the tests decode default.toml.
		panic(fmt.Sprintf("config: embedded default.toml: %v", errs))
	}
	return c
}

// EffectiveScheme resolves Redundancy.Scheme "auto" for a job of the given
// number of nodes: xor with two or more, single otherwise. Other schemes are
// returned as they are.
func (c *Config) EffectiveScheme(nodes int) string {
	if c.Redundancy.Scheme != SchemeAuto {
		return c.Redundancy.Scheme
	}
	if nodes >= 2 {
		return SchemeXOR
	}
	return SchemeSingle
}

// LogLevel returns Log.Level as a slog.Level; an invalid level gives
// slog.LevelInfo (Validate reports it).
func (c *Config) LogLevel() slog.Level {
	switch c.Log.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Prefix says how far to trust what the prefix holds.
type Prefix struct {
	// KeyFile holds the key that signs manifests and the index; "" means
	// ~/.config/scrfs/prefix.key, created on first use.
	KeyFile string `toml:"key_file" help:"file holding the key that signs the prefix's manifests and index"`
	// TrustUnsigned accepts manifests and index entries without a MAC (a
	// prefix written before scrfs signed it).
	TrustUnsigned bool `toml:"trust_unsigned" help:"use manifests and index entries that carry no MAC"`
}
