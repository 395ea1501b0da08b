package netbound

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestXORRing runs the ring's members in this process over loopback and
// checks every member stored the XOR of its row across the others'
// chunks (redset's layout: a member's p−1 chunks around a zero chunk at
// its own row), with a chunk of two pieces and a short last one.
func TestXORRing(t *testing.T) {
	needAddrs(t)
	for _, p := range []int{2, 3, 4} {
		ring := XORRing{Chunk: 2*ringBlock*2 + 1000, Piece: 2 * ringBlock}
		dir := t.TempDir()
		data := make([][]byte, p)
		for q := range p {
			data[q] = make([]byte, int64(p-1)*ring.Chunk)
			rand.Read(data[q])
			if err := os.WriteFile(filepath.Join(dir, "src"+string(rune('0'+q))), data[q], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// conns[q] is q's connection to its right neighbour; its far end
		// is that neighbour's left one.
		toRight, fromLeft := make([]*net.TCPConn, p), make([]*net.TCPConn, p)
		for q := range p {
			a, b, err := connectPair(context.Background(), "127.0.0.1", "127.0.0.2")
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			defer b.Close()
			toRight[q], fromLeft[(q+1)%p] = a, b
		}
		errs := make([]error, p)
		var wg sync.WaitGroup
		for q := range p {
			m, err := newRingMember(ring, q, p, fromLeft[q], toRight[q], filepath.Join(dir, "src"+string(rune('0'+q))), filepath.Join(dir, "dst"+string(rune('0'+q))))
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer m.close()
				errs[q] = m.run()
			}()
		}
		wg.Wait()
		for q := range p {
			if errs[q] != nil {
				t.Fatalf("p=%d member %d: %v", p, q, errs[q])
			}
			want := make([]byte, ring.Chunk)
			for s := range p {
				if s == q {
					continue
				}
				c := q
				if q > s {
					c = q - 1
				}
				for i := range want {
					want[i] ^= data[s][int64(c)*ring.Chunk+int64(i)]
				}
			}
			got, err := os.ReadFile(filepath.Join(dir, "dst"+string(rune('0'+q))))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("p=%d: member %d stored %d bytes, not its row's parity (%d bytes)", p, q, len(got), len(want))
			}
		}
	}
}

// TestProcsXORRing runs the ring with one process per node, as redbench's
// (d) does, and then in one process, which refuses it.
func TestProcsXORRing(t *testing.T) {
	needAddrs(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const p = 3
	ring := XORRing{Chunk: 3*ringBlock + 5, Piece: 2 * ringBlock}
	traffic := Traffic{{0, 2 * ring.Chunk, 0}, {0, 0, 2 * ring.Chunk}, {2 * ring.Chunk, 0, 0}}
	var nb InProc
	lio, err := NewLocal(filepath.Join(t.TempDir(), "lio"), p, 2*ring.Chunk, ring.Chunk, nb.Buffers(1)[0])
	if err != nil {
		t.Fatal(err)
	}
	defer lio.Close()
	rl, err := lio.WithXORRing(ring)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := (Procs{Self: self}).Run(context.Background(), traffic, rl); err != nil || s.Used.CPU <= 0 {
		t.Fatalf("ring in node processes: %+v, %v", s, err)
	}
	if _, err := nb.Run(context.Background(), traffic, rl); err == nil {
		t.Fatal("the ring ran in one process")
	}
}
