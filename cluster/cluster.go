package cluster

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/scrfs/scrfs/config"
	"github.com/scrfs/scrfs/layout"
)

// Cluster is the job's membership as this node sees it: every node's peer
// address, this node's index, and the redundancy sets.
type Cluster struct {
	Addrs  []string // host:port of every node, by index
	Self   int
	Scheme layout.Scheme
	Nodes  []layout.Node
	Layout *layout.Layout
	Source string // where the node list came from, for logs
}

// Size returns the number of nodes in the job.
func (c *Cluster) Size() int { return len(c.Addrs) }

// ResolveCluster works out the job's nodes and this node's index from the
// configuration: cluster.nodes, else cluster.hostfile, else Slurm
// (SLURM_JOB_NODELIST and SLURM_NODEID), else a job of one node. The index
// is cluster.node_index (or SCRFS_CLUSTER_NODE_INDEX), else SLURM_NODEID, else
// the entry naming a local address. env is usually os.Environ(). Settings the
// layout cannot satisfy are errors wrapping config.ErrInvalid (see Check).
func ResolveCluster(cfg *config.Config, env []string) (*Cluster, error) {
	c, err := resolve(cfg, env)
	if err != nil {
		return nil, err
	}
	if c.Self < 0 {
		if c.Self, err = selfIndex(c.Addrs); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Check reports every combination of settings that the job's layout cannot
// satisfy (a node index outside the node list, a scheme the sets are too
// small for, failure domains that do not match the nodes), as errors that
// wrap config.ErrInvalid and name the keys involved. It resolves the node
// list as the daemon does, but does not need this host to be one of the
// nodes, so `scrfs config` can run it on a login node.
func Check(cfg *config.Config, env []string) error {
	_, err := resolve(cfg, env)
	return err
}

// resolve finds the node list, the index if configured, and the sets. Self
// is -1 when only the local addresses can tell it.
func resolve(cfg *config.Config, env []string) (*Cluster, error) {
	c := &Cluster{Self: -1}
	var err error
	switch {
	case len(cfg.Cluster.Nodes) > 0:
		c.Addrs, err = layout.NormalizeAddrs(cfg.Cluster.Nodes, cfg.Cluster.Port)
		c.Source = "cluster.nodes"
	case cfg.Cluster.Hostfile != "":
		c.Addrs, err = readHostfile(cfg.Cluster.Hostfile, cfg.Cluster.Port)
		c.Source = "cluster.hostfile " + cfg.Cluster.Hostfile
	case getenv(env, "SLURM_JOB_NODELIST") != "":
		var hosts []string
		hosts, err = layout.ExpandNodelist(getenv(env, "SLURM_JOB_NODELIST"))
		if err == nil {
			c.Addrs, err = layout.NormalizeAddrs(hosts, cfg.Cluster.Port)
		}
		c.Source = "SLURM_JOB_NODELIST"
	default:
		c.Addrs, c.Source = []string{""}, "single node: cluster.nodes and cluster.hostfile are empty and SLURM_JOB_NODELIST is unset"
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", c.Source, err)
	}
	if c.Self, err = configuredIndex(cfg, env, c); err != nil {
		return nil, err
	}
	if c.Self < 0 && len(c.Addrs) == 1 {
		c.Self = 0
	}
	if err := c.formSets(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// invalid is a layout problem with the configuration: it names the key and
// wraps config.ErrInvalid, like the errors of config.Validate.
func invalid(key, value, format string, args ...any) error {
	return &config.Error{Key: key, Value: value, Kind: config.ErrInvalid, Msg: fmt.Sprintf(format, args...)}
}

// configuredIndex returns cluster.node_index, else SLURM_NODEID, checked
// against the node list; -1 if neither is set.
func configuredIndex(cfg *config.Config, env []string, c *Cluster) (int, error) {
	n := len(c.Addrs)
	if i := cfg.Cluster.NodeIndex; i >= 0 {
		if i >= n {
			return -1, invalid("cluster.node_index", strconv.Itoa(i),
				"is outside the %d node(s) of the job (%s); it counts from 0, or set -1 to work it out", n, c.Source)
		}
		return i, nil
	}
	if s := getenv(env, "SLURM_NODEID"); s != "" {
		i, err := strconv.Atoi(s)
		if err != nil {
			return -1, fmt.Errorf("cluster: SLURM_NODEID=%q is not a number", s)
		}
		if i < 0 || i >= n {
			return -1, invalid("", "", "SLURM_NODEID=%d is outside the %d node(s) of the job (%s); set cluster.node_index", i, n, c.Source)
		}
		return i, nil
	}
	return -1, nil
}

// selfIndex finds this node's index in addrs from the local addresses.
func selfIndex(addrs []string) (int, error) {
	local := localAddrs()
	found := -1
	for i, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		if local[strings.ToLower(host)] {
			if found >= 0 {
				return -1, fmt.Errorf("cluster: nodes %d (%s) and %d (%s) are both this host; set cluster.node_index (SCRFS_CLUSTER_NODE_INDEX)", found, addrs[found], i, a)
			}
			found = i
		}
	}
	if found < 0 {
		return -1, errors.New("cluster: none of the job's nodes is this host; set cluster.node_index (SCRFS_CLUSTER_NODE_INDEX)")
	}
	return found, nil
}

// formSets forms the redundancy sets and checks the scheme fits them.
func (c *Cluster) formSets(cfg *config.Config) error {
	domains, err := layout.ParseDomains(cfg.Cluster.FailureDomains)
	if err != nil {
		return invalid("cluster.failure_domains", fmt.Sprintf("%q", cfg.Cluster.FailureDomains), "%v", err)
	}
	if c.Nodes, err = layout.NewNodes(len(c.Addrs), domains); err != nil {
		return invalid("cluster.failure_domains", fmt.Sprintf("%q", cfg.Cluster.FailureDomains),
			"%v (the %d node(s) come from %s)", err, len(c.Addrs), c.Source)
	}
	c.Scheme = layout.Scheme{
		Kind:     cfg.EffectiveScheme(len(c.Addrs)),
		Replicas: cfg.Redundancy.Replicas,
		Parity:   cfg.Redundancy.Parity,
	}
	setSize := cfg.Redundancy.SetSize
	if c.Scheme.Kind == layout.KindSingle {
		setSize = 1
	}
	if c.Layout, err = layout.Build(c.Nodes, setSize); err != nil {
		return invalid("cluster.failure_domains", fmt.Sprintf("%q", cfg.Cluster.FailureDomains), "%v", err)
	}
	if err := c.Layout.CheckScheme(c.Scheme); err != nil {
		return invalid("", "", "%v, with %d node(s) from %s and redundancy.set_size = %d",
			err, len(c.Addrs), c.Source, cfg.Redundancy.SetSize)
	}
	return nil
}

func readHostfile(path string, port int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return layout.ParseHostfile(f, port)
}

// localAddrs returns this host's names and addresses, lower case.
func localAddrs() map[string]bool {
	out := map[string]bool{}
	if h, err := os.Hostname(); err == nil {
		out[strings.ToLower(h)] = true
		if short, _, ok := strings.Cut(h, "."); ok {
			out[strings.ToLower(short)] = true
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				out[ipn.IP.String()] = true
			}
		}
	}
	return out
}

func getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Terms are what every daemon of a running job must agree on, in a form a
// log line can show: the scheme and its parameters, the number of nodes,
// and the redundancy sets they form (a digest). The peer handshake refuses
// a daemon started with other terms — a replacement configured for another
// scheme, or a node list of another length — and both ends log why.
func (c *Cluster) Terms() string {
	h := sha256.New()
	for _, s := range c.Layout.Sets {
		fmt.Fprintln(h, s.Members)
	}
	return fmt.Sprintf("%s nodes=%d sets=%x", c.Scheme, c.Size(), h.Sum(nil)[:4])
}
