package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/scrfs/scrfs/layout"
)

// Validate checks every rule on every key and returns all violations joined,
// each an *Error wrapping ErrInvalid that names the key, its value, what is
// allowed and what the key is for. It does not modify c. An empty job.id is
// valid (Load resolves it); relative paths are not (Load resolves those too).
func (c *Config) Validate() error {
	return joinErrors(c.validate())
}

// checker collects violations.
type checker struct {
	c    *Config
	s    *schema
	errs []*Error
}

// fail records that key breaks a rule; msg says what is allowed.
func (v *checker) fail(key, format string, args ...any) {
	f := v.s.byKey[key]
	v.errs = append(v.errs, &Error{
		Key: key, Value: f.show(v.c), Kind: ErrInvalid,
		Msg: fmt.Sprintf(format, args...) + f.hint(),
	})
}

// between checks lo <= n <= hi.
func (v *checker) between(key string, n, lo, hi int) {
	switch {
	case n < lo && hi == maxInt:
		v.fail(key, "must be at least %d", lo)
	case n < lo || n > hi:
		v.fail(key, "must be between %d and %d", lo, hi)
	}
}

const maxInt = int(^uint(0) >> 1)

// oneOf checks that s is one of the allowed values.
func (v *checker) oneOf(key, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.fail(key, `must be one of "%s"`, strings.Join(allowed, `", "`))
}

// positive checks d > 0.
func (v *checker) positive(key string, d Duration) {
	if d.Duration <= 0 {
		v.fail(key, `must be a positive duration like "30s"`)
	}
}

// absPath checks that p is absolute, or empty if allowed.
func (v *checker) absPath(key, p string, emptyOK bool) {
	switch {
	case p == "" && emptyOK:
	case p == "":
		v.fail(key, "must be set to an absolute path")
	case !filepath.IsAbs(p):
		v.fail(key, "must be an absolute path (Load makes relative paths absolute)")
	}
}

// validate returns every violation, unlocated.
func (c *Config) validate() []*Error {
	v := &checker{c: c, s: newSchema()}
	c.validateJob(v)
	c.validateDatasets(v)
	c.validateLocal(v)
	c.validateCluster(v)
	c.validateData(v)
	return v.errs
}

func (c *Config) validateJob(v *checker) {
	if id := c.Job.ID; id != "" && !validJobID(id) {
		v.fail("job.id", "must be 1 to 64 characters from A-Z a-z 0-9 . _ -")
	}
	v.absPath("job.secret_file", c.Job.SecretFile, true)
	if n := len(c.Job.Secret); n > 0 && n < 16 {
		v.fail("job.secret", "must be at least 16 bytes, has %d", n)
	}
	v.absPath("paths.cache_base", c.Paths.CacheBase, false)
	v.absPath("paths.control_base", c.Paths.ControlBase, false)
	if layout.PrefixIsS3(c.Paths.Prefix) {
		if _, _, err := layout.ParseS3Prefix(c.Paths.Prefix); err != nil {
			v.fail("paths.prefix", "must be an absolute path or s3://bucket/path: %v", err)
		}
	} else {
		v.absPath("paths.prefix", c.Paths.Prefix, true)
	}
	v.absPath("prefix.key_file", c.Prefix.KeyFile, true)
}

// validJobID reports whether id matches ^[A-Za-z0-9._-]{1,64}$.
func validJobID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

func (c *Config) validateDatasets(v *checker) {
	if _, err := compileMatch(c.Datasets.Match); err != nil {
		v.fail("datasets.match", "%v", err)
	}
	if _, err := parseCompleteRules(c.Datasets.Complete); err != nil {
		v.fail("datasets.complete", "%v", err)
	}
	v.between("datasets.cache_size", c.Datasets.CacheSize, 1, maxInt)
}

// validateLocal checks the node-local settings: FUSE, metrics and logging.
func (c *Config) validateLocal(v *checker) {
	v.oneOf("fuse.mount", c.Fuse.Mount, MountAuto, MountDirect, MountFusermount)
	v.oneOf("fuse.passthrough", c.Fuse.Passthrough, PassthroughAuto, PassthroughOn, PassthroughOff)
	if mw := c.Fuse.MaxWrite; mw < 4*KiB || mw > MiB || mw%4096 != 0 {
		v.fail("fuse.max_write", `must be a multiple of 4KiB from "4KiB" to "1MiB"`)
	}
	for _, t := range []struct {
		key string
		d   Duration
	}{
		{"fuse.entry_timeout", c.Fuse.EntryTimeout},
		{"fuse.attr_timeout", c.Fuse.AttrTimeout},
		{"fuse.negative_timeout", c.Fuse.NegativeTimeout},
	} {
		if t.d.Duration < 0 {
			v.fail(t.key, `must not be negative ("0s" turns kernel caching off)`)
		}
	}
	if l := c.Metrics.Listen; l != "" {
		if err := checkHostPort(l, 0); err != nil {
			v.fail("metrics.listen", `%v; want "host:port" like "127.0.0.1:9464" or ":9464", or "" for no endpoint`, err)
		}
	}
	if c.Metrics.Pprof && !loopbackListen(c.Metrics.Listen) {
		v.fail("metrics.pprof", "needs a loopback metrics.listen (127.0.0.1, [::1] or localhost), not %s: profiles show the daemon's memory to whoever reaches the port", quote(c.Metrics.Listen))
	}
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "text", "json")
}

// loopbackListen reports whether listen is host:port on a loopback host.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkHostPort checks that s is "host:port" with a numeric port of at least
// minPort (host may be empty: all interfaces).
func checkHostPort(s string, minPort int) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return fmt.Errorf("not host:port: %s", ae.Err)
		}
		return fmt.Errorf("not host:port: %v", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < minPort || n > 65535 {
		return fmt.Errorf("port %q is not a number from %d to 65535", port, minPort)
	}
	return nil
}

func (c *Config) validateCluster(v *checker) {
	cl := &c.Cluster
	v.between("cluster.port", cl.Port, 1, 65535)
	if cl.Port >= 1 && cl.Port <= 65535 {
		// layout owns what a node entry may look like; a hostfile and
		// Slurm's list go through the same rule when the job starts.
		if _, err := layout.NormalizeAddrs(cl.Nodes, cl.Port); err != nil {
			v.fail("cluster.nodes", `%v; want "host:port" or "host" (IPv6 as "[::1]:7411"), each node once`, err)
		}
	}
	v.absPath("cluster.hostfile", cl.Hostfile, true)
	if cl.Hostfile != "" && len(cl.Nodes) > 0 {
		v.fail("cluster.hostfile", "cannot be combined with cluster.nodes; set one of them")
	}
	switch {
	case cl.NodeIndex < -1:
		v.fail("cluster.node_index", "must be -1 (work it out) or a position in the node list from 0")
	case len(cl.Nodes) > 0 && cl.NodeIndex >= len(cl.Nodes):
		v.fail("cluster.node_index", "must be less than the %d entries of cluster.nodes (it counts from 0), or -1", len(cl.Nodes))
	}
	if cl.Listen != "" {
		if err := checkHostPort(cl.Listen, 1); err != nil {
			v.fail("cluster.listen", `%v; want "host:port" like "0.0.0.0:7411", or "" for this node's own entry`, err)
		}
	}
	for i, d := range cl.FailureDomains {
		if d == "" || strings.HasPrefix(d, "/") || strings.HasSuffix(d, "/") || strings.Contains(d, "//") {
			v.fail("cluster.failure_domains", `entry %d %s: want a domain path like "rack1" or "rack1/enc2" with no empty component`, i+1, quote(d))
			break
		}
	}
	if n, m := len(cl.Nodes), len(cl.FailureDomains); n > 0 && m > 0 && n != m {
		v.fail("cluster.failure_domains", "has %d entries but cluster.nodes has %d; give one domain per node, or none", m, n)
	}
	v.positive("cluster.connect_timeout", cl.ConnectTimeout)
	v.positive("cluster.io_timeout", cl.IOTimeout)
	v.positive("cluster.heartbeat", cl.Heartbeat)
	if cl.Heartbeat.Duration > 0 && cl.IOTimeout.Duration > 0 && cl.Heartbeat.Duration >= cl.IOTimeout.Duration {
		v.fail("cluster.heartbeat", "must be shorter than cluster.io_timeout (%s), or live peers time out", cl.IOTimeout)
	}
}

// validateData checks redundancy, flush, fetch and restart.
func (c *Config) validateData(v *checker) {
	r := &c.Redundancy
	v.oneOf("redundancy.scheme", r.Scheme, SchemeAuto, SchemeSingle, SchemePartner, SchemeXOR, SchemeRS)
	v.between("redundancy.set_size", r.SetSize, 2, maxInt)
	v.between("redundancy.replicas", r.Replicas, 1, maxInt)
	v.between("redundancy.parity", r.Parity, 1, 255)
	v.positive("redundancy.timeout", r.Timeout)
	if r.PieceSize < 4*KiB || r.PieceSize > 64*MiB {
		v.fail("redundancy.piece_size", `must be from "4KiB" to "64MiB"`)
	}
	// The limits below tie parameters to the largest set; a smaller set (too
	// few nodes) is the layout's business.
	if r.SetSize >= 2 {
		switch {
		case r.Scheme == SchemePartner && r.Replicas > r.SetSize-1:
			v.fail("redundancy.replicas", "must be at most redundancy.set_size - 1 (%d) for the partner scheme", r.SetSize-1)
		case r.Scheme == SchemeRS && r.Parity > r.SetSize-1:
			v.fail("redundancy.parity", "must be at most redundancy.set_size - 1 (%d) for the rs scheme: a set needs data as well as checksums", r.SetSize-1)
		case r.Scheme == SchemeRS && r.SetSize+r.Parity > 256:
			v.fail("redundancy.set_size", "plus redundancy.parity must be at most 256 for the rs scheme (GF(2^8))")
		}
	}
	v.between("flush.every", c.Flush.Every, 0, maxInt)
	if c.Flush.Bandwidth < 0 {
		v.fail("flush.bandwidth", `must not be negative ("0" = unlimited)`)
	}
	v.between("flush.streams", c.Flush.Streams, 1, 64)
	v.positive("restart.member_timeout", c.Restart.MemberTimeout)
	if rc := c.Namespace.ReadCache; c.ReadCacheBytes(1<<40) <= 0 || (strings.HasSuffix(rc, "%") && c.ReadCacheBytes(100) > 100) {
		v.fail("namespace.read_cache", `%q: want a size like "8GiB" or a share of the cache file system like "25%%" (more than 0, at most 100%%)`, rc)
	}
	if c.Namespace.FetchWhole < 0 {
		v.fail("namespace.fetch_whole", `must not be negative ("0": every file block by block as it is read)`)
	}
}
