package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/reedsolomon"
)

// protectCase is one scheme configuration exercised end to end.
type protectCase struct {
	name  string
	nodes int
	env   []string
}

var protectCases = []protectCase{
	{"partner", 4, []string{"SCRFS_REDUNDANCY_SCHEME=partner", "SCRFS_REDUNDANCY_REPLICAS=1"}},
	// The copy path, forced: the same bytes must come out (by default
	// receivers splice PARTNER copies, XOR's parity and RS's checksums).
	{"partner-copy", 4, []string{"SCRFS_REDUNDANCY_SCHEME=partner", "SCRFS_REDUNDANCY_REPLICAS=2", "SCRFS_ZEROCOPY=0"}},
	{"xor", 4, []string{"SCRFS_REDUNDANCY_SCHEME=xor"}},
	{"xor-uneven", 5, []string{"SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_REDUNDANCY_SET_SIZE=4"}},
	{"rs", 5, []string{"SCRFS_REDUNDANCY_SCHEME=rs", "SCRFS_REDUNDANCY_PARITY=2"}},
	{"rs-copy", 5, []string{"SCRFS_REDUNDANCY_SCHEME=rs", "SCRFS_REDUNDANCY_PARITY=2", "SCRFS_ZEROCOPY=0"}},
}

// writeNodeData writes a different tree on every node: node i writes i
// files of varying sizes (node 0 none, so one member contributes an empty
// logical file) plus, on node 1, a 0-byte file.
func writeNodeData(t *testing.T, c *Cluster, dataset string) {
	t.Helper()
	for i, n := range c.Nodes {
		if i == 0 {
			continue
		}
		for f := 0; f < i; f++ {
			writeRandom(t, n.Path(dataset, fmt.Sprintf("rank_%d", i), fmt.Sprintf("part_%d.bin", f)), int64(100_000*i+37*f+f*f*4099), uint64(i*100+f))
		}
		if i == 1 {
			writeRandom(t, n.Path(dataset, "empty.bin"), 0, 0)
		}
	}
}

func TestProtectSchemes(t *testing.T) {
	for _, pc := range protectCases {
		t.Run(pc.name, func(t *testing.T) {
			c := NewCluster(t, pc.nodes, append(pc.env, "SCRFS_DATASETS_COMPLETE=marker:COMPLETE")...).Start()
			writeNodeData(t, c, "ckpt.1")
			// The marker on one node completes the dataset everywhere,
			// including on node 0, which wrote nothing.
			must(t, os.WriteFile(c.Nodes[1].Path("ckpt.1", "COMPLETE"), nil, 0o644))
			c.WaitState(60*time.Second, "ckpt.1", "protected")
			for i, n := range c.Nodes {
				ds := n.Dataset("ckpt.1")
				if ds == nil || ds.State != "protected" {
					t.Fatalf("node %d: %+v", i, ds)
				}
				if _, err := os.Stat(n.Path("ckpt.1", ".scrfs")); !os.IsNotExist(err) {
					t.Fatalf("node %d: .scrfs visible through the mount: %v", i, err)
				}
			}
			checkRedundancy(t, c, "ckpt.1")
			st := c.Nodes[0].Status()
			if len(st.Peers) == 0 {
				t.Fatal("status shows no peer links")
			}
			for _, p := range st.Peers {
				if !p.Up {
					t.Fatalf("peer link down: %+v", p)
				}
			}
		})
	}
}

// redFile is a redundancy file parsed by the documented byte layout
// (docs/formats-redundancy.md), independently of the schemes package.
type redFile struct {
	Data   []byte
	Header struct {
		Scheme   string `json:"scheme"`
		Size     int    `json:"size"`
		Replicas int    `json:"replicas"`
		Parity   int    `json:"parity"`
		Nodes    []int  `json:"nodes"`
		Rank     int    `json:"rank"`
		Chunk    int64  `json:"chunk"`
		Members  []struct {
			Rank    int   `json:"rank"`
			Logical int64 `json:"logical"`
			Files   []struct {
				Path string `json:"path"`
				Type string `json:"type"`
				Size int64  `json:"size"`
			} `json:"files"`
		} `json:"members"`
		Segments []struct {
			Rank   int   `json:"rank"`
			Index  int   `json:"index"`
			Offset int64 `json:"offset"`
			Length int64 `json:"length"`
		} `json:"segments"`
	}
}

func readRedFile(t *testing.T, dir string) *redFile {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, ".scrfs", "*.redset"))
	if len(matches) != 1 {
		t.Fatalf("%s: redundancy files %v, want one", dir, matches)
	}
	raw, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 52 || string(raw[:8]) != "SCRFSRED" {
		t.Fatalf("%s: not a redundancy file", matches[0])
	}
	hlen := int64(binary.LittleEndian.Uint32(raw[12:]))
	dlen := int64(binary.LittleEndian.Uint64(raw[16:]))
	rf := &redFile{Data: raw[32 : 32+dlen]}
	if err := json.Unmarshal(raw[32+dlen:32+dlen+hlen], &rf.Header); err != nil {
		t.Fatalf("%s: header: %v", matches[0], err)
	}
	return rf
}

// logicalFile concatenates a member's regular files in header order.
func logicalFile(t *testing.T, dir string, rf *redFile) []byte {
	t.Helper()
	var out []byte
	for _, f := range rf.Header.Members[0].Files {
		if f.Type != "file" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// checkRedundancy recomputes every member's redundancy data from the
// members' files and compares it with what the daemons stored.
func checkRedundancy(t *testing.T, c *Cluster, dataset string) {
	t.Helper()
	p := len(c.Nodes)
	files := make([]*redFile, p)
	logical := make([][]byte, p) // by rank
	var maxLen int64
	for _, n := range c.Nodes {
		rf := readRedFile(t, n.CacheDir(dataset))
		if rf.Header.Size != p {
			t.Fatalf("set size %d, want %d", rf.Header.Size, p)
		}
		files[rf.Header.Rank] = rf
		logical[rf.Header.Rank] = logicalFile(t, n.CacheDir(dataset), rf)
		maxLen = max(maxLen, int64(len(logical[rf.Header.Rank])))
	}
	pad := func(b []byte, n int64) []byte { return append(bytes.Clone(b), make([]byte, n-int64(len(b)))...) }
	switch files[0].Header.Scheme {
	case "partner":
		for r, rf := range files {
			var want []byte
			for i := 1; i <= rf.Header.Replicas; i++ {
				want = append(want, logical[(r-i+p)%p]...)
			}
			if !bytes.Equal(rf.Data, want) {
				t.Errorf("partner rank %d: stored %d bytes differ from its left partners' %d", r, len(rf.Data), len(want))
			}
		}
	case "xor":
		chunk := max((maxLen+int64(p-2))/int64(p-1), 1)
		for r, rf := range files {
			if int64(len(rf.Data)) != chunk || rf.Header.Chunk != chunk {
				t.Fatalf("xor rank %d: %d bytes of parity, chunk %d; want %d", r, len(rf.Data), rf.Header.Chunk, chunk)
			}
			want := make([]byte, chunk)
			for q := 0; q < p; q++ {
				if q == r {
					continue
				}
				c := r // member q's chunk in row r
				if r > q {
					c = r - 1
				}
				src := pad(logical[q], chunk*int64(p-1))[int64(c)*chunk : int64(c+1)*chunk]
				for i := range want {
					want[i] ^= src[i]
				}
			}
			if !bytes.Equal(rf.Data, want) {
				t.Errorf("xor rank %d: parity differs from the reference", r)
			}
		}
	case "rs":
		k := files[0].Header.Parity
		chunk := max((maxLen+int64(p-k-1))/int64(p-k), 1)
		enc, err := reedsolomon.New(p, k)
		if err != nil {
			t.Fatal(err)
		}
		// rows[j][q] is member q's contribution to row j.
		rows := make([][][]byte, p)
		for j := range rows {
			rows[j] = make([][]byte, p+k)
			for q := range p + k {
				rows[j][q] = make([]byte, chunk)
			}
		}
		// Member q holds checksum i of row q+i; in every other row it
		// contributes its next data chunk, rows taken in ascending order.
		for q := 0; q < p; q++ {
			data := pad(logical[q], chunk*int64(p-k))
			n := int64(0)
			for j := 0; j < p; j++ {
				if (j-q+p)%p < k {
					continue
				}
				copy(rows[j][q], data[n*chunk:(n+1)*chunk])
				n++
			}
		}
		for j := range rows {
			if err := enc.Encode(rows[j]); err != nil {
				t.Fatal(err)
			}
		}
		for r, rf := range files {
			if int64(len(rf.Data)) != int64(k)*chunk {
				t.Fatalf("rs rank %d: %d bytes, want %d", r, len(rf.Data), int64(k)*chunk)
			}
			for i := 0; i < k; i++ {
				row := (r + i) % p
				if !bytes.Equal(rf.Data[int64(i)*chunk:int64(i+1)*chunk], rows[row][p+i]) {
					t.Errorf("rs rank %d checksum %d (row %d) differs from the reference", r, i, row)
				}
			}
		}
	default:
		t.Fatalf("unexpected scheme %q", files[0].Header.Scheme)
	}
}

// TestWrongSecretRefused: a daemon without the job's secret can neither
// talk to nor hear from the others, and both sides say so.
func TestWrongSecretRefused(t *testing.T) {
	// The refused member never answers the restart round: keep its wait short.
	c := NewCluster(t, 2, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_RESTART_MEMBER_TIMEOUT=2s")
	c.Nodes[1].Env = append(c.Nodes[1].Env, "SCRFS_JOB_SECRET=not-the-job-secret-at-all")
	c.Start()
	c.Nodes[0].WaitLog(30*time.Second, "authentication failed")
	c.Nodes[1].WaitLog(30*time.Second, "authentication failed")
	for _, n := range c.Nodes {
		for _, p := range n.Status().Peers {
			if p.Up {
				t.Fatalf("link up despite a wrong secret: %+v", p)
			}
		}
	}
}

// TestStoppedMemberFailsDataset: a member that is gone when a dataset
// completes cannot report its share, so the dataset fails on the others
// with the missing node named, instead of hanging or being protected
// without its files.
func TestStoppedMemberFailsDataset(t *testing.T) {
	c := NewCluster(t, 3, "SCRFS_REDUNDANCY_SCHEME=xor", "SCRFS_REDUNDANCY_TIMEOUT=2s",
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE").Start()
	writeRandom(t, c.Nodes[0].Path("ckpt.1", "a"), 1<<20, 1)
	writeRandom(t, c.Nodes[1].Path("ckpt.1", "b"), 1<<20, 2)
	c.Nodes[2].Kill()
	must(t, os.WriteFile(c.Nodes[0].Path("ckpt.1", "COMPLETE"), nil, 0o644))
	for _, n := range c.Nodes[:2] {
		ds := n.WaitState(60*time.Second, "ckpt.1", "failed")
		if !strings.Contains(ds.Reason, "node 2") {
			t.Fatalf("dataset on a surviving node: %+v", ds)
		}
	}
}
