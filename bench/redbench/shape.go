package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/scrfs/scrfs/internal/loopback"
)

// linkRate is what -link accepts: a tc rate such as 2gbit or 500mbit.
var linkRate = regexp.MustCompile(`^[1-9][0-9]*(\.[0-9]+)?[kmg]?bit$`)

// shapeLinks makes the network the bound, as it is on a cluster, where each
// node's NIC limits what it receives: an HTB qdisc on lo caps the traffic
// to each node's address at rate, for the bounds and the daemons alike. It
// refuses to replace a qdisc someone else put on lo. The returned function
// removes the shaping; after a crash, `tc qdisc del dev lo root` does.
func shapeLinks(rate string, nodes int) (func(), error) {
	out, err := exec.Command("tc", "qdisc", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("-link needs tc (Debian package iproute2) and root: %v: %s", err, out)
	}
	if !strings.HasPrefix(string(out), "qdisc noqueue") {
		return nil, fmt.Errorf("-link: lo already has a qdisc, not replacing it: %s", strings.TrimSpace(string(out)))
	}
	undo := func() { exec.Command("tc", "qdisc", "del", "dev", "lo", "root").Run() }
	cmds := [][]string{
		{"qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "999", "r2q", "1000"},
		{"class", "add", "dev", "lo", "parent", "1:", "classid", "1:999", "htb", "rate", "100gbit", "quantum", "200000"},
	}
	for i := range nodes {
		class := "1:" + strconv.Itoa(i+1)
		cmds = append(cmds,
			[]string{"class", "add", "dev", "lo", "parent", "1:", "classid", class, "htb", "rate", rate, "ceil", rate,
				"burst", "4mb", "cburst", "4mb", "quantum", "200000"},
			[]string{"filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
				"match", "ip", "dst", loopback.IP(i) + "/32", "flowid", class})
	}
	for _, args := range cmds {
		if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
			undo()
			return nil, fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return undo, nil
}
