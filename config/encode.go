package config

import (
	"bytes"

	"github.com/BurntSushi/toml"
)

// TOML returns the configuration as a TOML document with every key, for
// `scrfs config` and for logs. A non-empty job.secret is printed as
// "<redacted>" (which would not validate if loaded back, on purpose). c is
// not modified.
func (c *Config) TOML() []byte {
	cp := *c
	if cp.Job.Secret != "" {
		cp.Job.Secret = redacted
	}
	// The encoder leaves out nil slices; an absent key would read as "not
	// set" rather than "empty".
	for _, l := range []*[]string{&cp.Datasets.Complete, &cp.Cluster.Nodes, &cp.Cluster.FailureDomains} {
		if *l == nil {
			*l = []string{}
		}
	}
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(&cp); err != nil {
		// Every field type encodes; only a change to Config could get here.
		return []byte("# cannot encode configuration: " + err.Error() + "\n")
	}
	return buf.Bytes()
}
