package schemes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/redfile"
)

// ExampleEncode protects a three-node XOR set. Each member runs Encode on
// its own node with its own dataset directory; here the three run as
// goroutines and newMemNet stands in for the daemon's peer links.
func ExampleEncode() {
	base, err := os.MkdirTemp("", "scrfs-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(base)

	p := Params{Kind: XOR, Size: 3}
	set := SetInfo{Group: 0, Groups: 1, Nodes: []int{10, 11, 12}}
	links := newMemNet()
	results := make([]*Result, p.Size)
	var wg sync.WaitGroup
	for r := 0; r < p.Size; r++ {
		dir := filepath.Join(base, fmt.Sprint("node", r), "ckpt.100")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "rank.bin"), bytes.Repeat([]byte{byte(r)}, 1000*(r+1)), 0o644)
		// The daemon hands Encode the member's files as the dataset's
		// record lists them; here they are listed on the spot.
		list, err := files.Scan(dir)
		if err != nil {
			fmt.Println(err)
			return
		}
		m := Member{Rank: r, Set: set, Dataset: "ckpt.100", Dir: dir, Files: list}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := Encode(context.Background(), p, m, links.links(r))
			if err != nil {
				fmt.Println(err)
				return
			}
			results[r] = res
		}()
	}
	wg.Wait()
	for _, res := range results {
		h, err := redfile.ReadHeader(res.File)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %d data bytes, chunk %d, records ranks %d and %d\n",
			filepath.Base(res.File), res.DataBytes, h.Chunk, h.Members[0].Rank, h.Members[1].Rank)
	}
	// Output:
	// 10.xor.grp_1_of_1.mem_1_of_3.redset: 1000 data bytes, chunk 1500, records ranks 0 and 2
	// 11.xor.grp_1_of_1.mem_2_of_3.redset: 2000 data bytes, chunk 1500, records ranks 1 and 0
	// 12.xor.grp_1_of_1.mem_3_of_3.redset: 3000 data bytes, chunk 1500, records ranks 2 and 1
}
