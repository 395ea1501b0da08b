package loopback

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortBelowEphemeralRange(t *testing.T) {
	port, err := FreePort(3)
	if err != nil {
		t.Fatal(err)
	}
	if low := ephemeralLow(); port >= low || port < 10000 {
		t.Fatalf("port %d outside [10000, %d)", port, low)
	}
	for i := range 3 {
		l, err := net.Listen("tcp", net.JoinHostPort(IP(i), strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d not free on %s: %v", port, IP(i), err)
		}
		l.Close()
	}
	if IP(0) != "127.0.0.1" || IP(4) != "127.0.0.5" {
		t.Fatalf("IP(0), IP(4) = %s, %s", IP(0), IP(4))
	}
}
