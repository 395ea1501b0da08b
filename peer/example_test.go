package peer_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/scrfs/scrfs/peer"
)

// Two daemons of one job on loopback: node 1 serves a request kind, node 0
// calls it, then streams bulk bytes to node 1.
func Example() {
	ctx := context.Background()
	secret := []byte("the job's shared secret, >= 16 bytes")
	start := func(self int, addrs []string, h map[string]peer.Handler) *peer.Node {
		n, err := peer.Start(ctx, peer.Config{Job: "job-1", Self: self, Addrs: addrs, Secret: secret, Handlers: h})
		if err != nil {
			log.Fatal(err)
		}
		return n
	}
	// Port 0: each node binds a free port; tell node 0 where node 1 is.
	n1 := start(1, []string{"", "127.0.0.2:0"}, map[string]peer.Handler{
		"upper": func(_ context.Context, from int, req []byte) ([]byte, error) {
			return []byte(strings.ToUpper(string(req))), nil
		},
	})
	defer n1.Close()
	n0 := start(0, []string{"127.0.0.1:0", n1.Addr().String()}, nil)
	defer n0.Close()

	resp, err := n0.Call(ctx, 1, "upper", []byte("checkpoint 100 complete"))
	fmt.Println(string(resp), err)

	out, err := n0.OpenStream(ctx, 1, "ckpt.100/xor")
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	in, err := n1.AcceptStream(ctx, 0, "ckpt.100/xor")
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	_ = out.Send(ctx, []byte("parity chunk"))
	buf := make([]byte, 64<<10) // reused for every frame
	frame, err := in.Recv(ctx, buf)
	fmt.Println(string(frame), err)
	// Output:
	// CHECKPOINT 100 COMPLETE <nil>
	// parity chunk <nil>
}
