package layout

import (
	"fmt"
	"testing"
)

// benchNodes makes n nodes over racks of 16 nodes, 4 enclosures per rack.
func benchNodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{Index: i, Domain: []string{fmt.Sprintf("rack%d", i/16), fmt.Sprintf("enc%d", i/4%4)}}
	}
	return nodes
}

func BenchmarkBuild(b *testing.B) {
	for _, c := range []struct{ n, size int }{{64, 8}, {1024, 8}, {4096, 8}, {4096, 4096}} {
		b.Run(fmt.Sprintf("nodes=%d/set=%d", c.n, c.size), func(b *testing.B) {
			nodes := benchNodes(c.n)
			if _, err := Build(nodes, c.size); err != nil { // warm-up
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Build(nodes, c.size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTolerance(b *testing.B) {
	nodes := benchNodes(1024)
	l, err := Build(nodes, 8)
	if err != nil {
		b.Fatal(err)
	}
	s := Scheme{Kind: KindPartner, Replicas: 2}
	_ = Tolerance(l, nodes, s) // warm-up
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = Tolerance(l, nodes, s)
	}
}

func BenchmarkExpandNodelist(b *testing.B) {
	const list = "node[0001-4096],login[1-4],rack[1-8]-n[01-64]"
	if _, err := ExpandNodelist(list); err != nil { // warm-up
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ExpandNodelist(list); err != nil {
			b.Fatal(err)
		}
	}
}
