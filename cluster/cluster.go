package cluster

import (
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
// the entry naming a local address. env is usually os.Environ().
func ResolveCluster(cfg *config.Config, env []string) (*Cluster, error) {
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
		c.Addrs, c.Self, c.Source = []string{""}, 0, "single node"
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", c.Source, err)
	}
	if c.Self < 0 {
		if c.Self, err = selfIndex(cfg, env, c.Addrs); err != nil {
			return nil, err
		}
	}
	if err := c.formSets(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// selfIndex finds this node's index in addrs.
func selfIndex(cfg *config.Config, env []string, addrs []string) (int, error) {
	check := func(i int, from string) (int, error) {
		if i < 0 || i >= len(addrs) {
			return -1, fmt.Errorf("cluster: node index %d from %s is outside the %d nodes of the job", i, from, len(addrs))
		}
		return i, nil
	}
	if cfg.Cluster.NodeIndex >= 0 {
		return check(cfg.Cluster.NodeIndex, "cluster.node_index")
	}
	if s := getenv(env, "SLURM_NODEID"); s != "" {
		i, err := strconv.Atoi(s)
		if err != nil {
			return -1, fmt.Errorf("cluster: SLURM_NODEID=%q is not a number", s)
		}
		return check(i, "SLURM_NODEID")
	}
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
		return fmt.Errorf("cluster.failure_domains: %w", err)
	}
	if c.Nodes, err = layout.NewNodes(len(c.Addrs), domains); err != nil {
		return err
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
		return err
	}
	if err := c.Layout.CheckScheme(c.Scheme); err != nil {
		return fmt.Errorf("redundancy: %w", err)
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
