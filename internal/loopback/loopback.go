// Package loopback picks addresses for clusters of real daemons on one
// machine, as the end-to-end tests and the benchmarks run them: node i on
// 127.0.0.(i+1) (Linux routes all of 127/8 to lo), all on one port.
package loopback

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// IP returns the address of node i (0-based).
func IP(i int) string { return fmt.Sprintf("127.0.0.%d", i+1) }

// FreePort returns a TCP port that nothing listens on or is bound to on
// the first n loopback addresses. It is drawn from below the kernel's
// ephemeral range: a port from inside it could be taken, between the check
// and the daemons' listen, as the source port of some outgoing connection,
// whose TIME_WAIT then refuses the listener for a minute.
func FreePort(n int) (int, error) {
	low := ephemeralLow()
	const floor = 10000
	if low-floor < 1000 {
		return 0, fmt.Errorf("ephemeral port range starts at %d: no room below it for cluster ports", low)
	}
	for range 100 {
		port := floor + rand.IntN(low-floor)
		if free(port, n) {
			return port, nil
		}
	}
	return 0, errors.New("no TCP port free on all the loopback addresses")
}

func free(port, n int) bool {
	for i := range n {
		l, err := net.Listen("tcp", net.JoinHostPort(IP(i), strconv.Itoa(port)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux's default when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				return v
			}
		}
	}
	return 32768
}
