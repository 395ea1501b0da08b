package layout

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// maxHostfileLine bounds one hostfile line; a longer line is an error rather
// than an unbounded allocation.
const maxHostfileLine = 4096

// NormalizeAddrs normalises the cluster.nodes list of a configuration to
// host:port entries, in the order given: "node1" becomes "node1:7411" with
// defaultPort 7411, "[::1]:7000" and "10.0.0.1:7000" keep their ports, a bare
// IPv6 address ("::1") gets defaultPort, and IPv6 addresses are written in
// their canonical form inside brackets. Hosts are compared case-insensitively,
// so "Node1" and "node1:7411" are duplicates; the same host with two different
// ports is allowed (several daemons on one machine).
//
// defaultPort must be in 1..65535. A malformed entry wraps ErrAddress and a
// repeated one wraps ErrDuplicate; both name the entry by its 0-based position.
// The returned slice is new; entries is not modified.
func NormalizeAddrs(entries []string, defaultPort int) ([]string, error) {
	if err := checkPort(defaultPort); err != nil {
		return nil, fmt.Errorf("default port: %w", err)
	}
	out := make([]string, 0, len(entries))
	seen := make(map[string]int, len(entries))
	for i, e := range entries {
		a, err := normalizeAddr(e, defaultPort)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		key := strings.ToLower(a)
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("%w: node %d %s repeats node %d", ErrDuplicate, i, a, first)
		}
		seen[key] = i
		out = append(out, a)
	}
	return out, nil
}

// ParseHostfile reads a host file: one "host" or "host:port" per line
// ("[::1]:7411" for IPv6), '#' starting a comment that runs to the end of the
// line, blank lines ignored. Entries are normalised as NormalizeAddrs does and
// returned in file order. An entry repeated on a later line is an error
// wrapping ErrDuplicate that names both lines; a malformed line wraps
// ErrAddress and names the line. Lines longer than 4096 bytes and read errors
// are reported too. r is read to the end or to the first error; the caller
// keeps ownership of it.
func ParseHostfile(r io.Reader, defaultPort int) ([]string, error) {
	if err := checkPort(defaultPort); err != nil {
		return nil, fmt.Errorf("hostfile: default port: %w", err)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxHostfileLine)
	var out []string
	seen := make(map[string]int)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if c := strings.IndexByte(text, '#'); c >= 0 {
			text = text[:c]
		}
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		if len(out) >= MaxNodelistHosts {
			return nil, fmt.Errorf("hostfile line %d: %w: more than %d hosts", line, ErrAddress, MaxNodelistHosts)
		}
		a, err := normalizeAddr(text, defaultPort)
		if err != nil {
			return nil, fmt.Errorf("hostfile line %d: %w", line, err)
		}
		key := strings.ToLower(a)
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("hostfile line %d: %w: %s is already on line %d", line, ErrDuplicate, a, first)
		}
		seen[key] = line
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hostfile line %d: %w", line+1, err)
	}
	return out, nil
}

// normalizeAddr turns one entry into host:port.
func normalizeAddr(entry string, defaultPort int) (string, error) {
	e := strings.TrimSpace(entry)
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrAddress, short(entry), why)
	}
	if e == "" {
		return "", bad("empty entry")
	}
	host, port := e, defaultPort
	switch {
	case strings.HasPrefix(e, "["):
		end := strings.IndexByte(e, ']')
		if end < 0 {
			return "", bad("missing ']' after IPv6 address")
		}
		host = e[1:end]
		rest := e[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return "", bad("unexpected text after ']'")
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return "", bad(err.Error())
			}
			port = p
		}
		ip, err := parseIPv6(host)
		if err != nil {
			return "", bad("brackets must hold an IPv6 address")
		}
		return net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil
	case strings.Count(e, ":") > 1:
		// More than one colon without brackets can only be a bare IPv6
		// address; "::1:7411" is ambiguous, so ports need brackets.
		ip, err := parseIPv6(e)
		if err != nil {
			return "", bad("IPv6 addresses with a port must be written [addr]:port")
		}
		return net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil
	case strings.Contains(e, ":"):
		h, p, _ := strings.Cut(e, ":")
		pp, err := parsePort(p)
		if err != nil {
			return "", bad(err.Error())
		}
		host, port = h, pp
	}
	if err := checkHostName(host); err != nil {
		return "", bad(err.Error())
	}
	return host + ":" + strconv.Itoa(port), nil
}

// parseIPv6 parses an IPv6 address; a zone (fe80::1%eth0) may only use host
// name characters, so the bracketed output always parses back to itself.
func parseIPv6(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return ip, err
	}
	if !ip.Is6() {
		return ip, fmt.Errorf("%s is not an IPv6 address", s)
	}
	if z := ip.Zone(); z != "" {
		if err := checkHostChars(z); err != nil {
			return ip, err
		}
	}
	return ip, nil
}

// checkHostName accepts DNS names and IPv4 addresses.
func checkHostName(h string) error {
	if h == "" {
		return fmt.Errorf("empty host")
	}
	if len(h) > maxHostLen {
		return fmt.Errorf("host longer than %d bytes", maxHostLen)
	}
	return checkHostChars(h)
}

func parsePort(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty port")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("port %q is not a number", short(s))
		}
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %s is out of range 1..65535", short(s))
	}
	return p, nil
}

func checkPort(p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("%w: port %d is out of range 1..65535", ErrAddress, p)
	}
	return nil
}
