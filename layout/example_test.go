package layout

import "fmt"

func ExampleBuild() {
	// Eight nodes in two racks, XOR over sets of four.
	domains, err := ParseDomains([]string{"rack1", "rack1", "rack1", "rack1", "rack2", "rack2", "rack2", "rack2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	nodes, _ := NewNodes(8, domains)
	l, err := Build(nodes, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	set, rank := l.Find(4)
	p := len(set.Members)
	fmt.Println("sets:", l.Sets)
	fmt.Println("node 4: set", set.ID, "rank", rank,
		"left", set.Members[Left(p, rank)], "right", set.Members[Right(p, rank)])
	fmt.Println("file:", RedundancyFileName(4, KindXOR, set.ID, len(l.Sets), rank, p))
	fmt.Println(l.Warnings[0])
	// Output:
	// sets: [{0 [0 4 2 6]} {1 [1 5 3 7]}]
	// node 4: set 0 rank 1 left 0 right 2
	// file: 4.xor.grp_1_of_2.mem_2_of_4.redset
	// set 0: nodes 0 and 2 share failure domain rack1
}
