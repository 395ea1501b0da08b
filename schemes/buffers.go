package schemes

import (
	"sync"
	"unsafe"
)

// maxFreePerSize bounds how many idle buffers of one size a Buffers keeps.
const maxFreePerSize = 1024

// Buffers recycles the piece-sized buffers operations stream through. A
// daemon keeps one for its lifetime and passes it to every call with
// WithBuffers: fresh memory is slow to touch on some machines (page faults
// of tens of microseconds per page), and a steady-state encode then touches
// none. Safe for concurrent use by any number of operations; the zero value
// is not usable, call NewBuffers.
type Buffers struct {
	mu   sync.Mutex
	free map[int][][]byte // mu protects free; keyed by capacity
}

// NewBuffers returns an empty pool.
func NewBuffers() *Buffers { return &Buffers{free: make(map[int][][]byte)} }

// get returns a buffer of capacity size and length n (n <= size); its
// contents are undefined.
func (b *Buffers) get(size, n int) []byte {
	b.mu.Lock()
	if l := b.free[size]; len(l) > 0 {
		buf := l[len(l)-1]
		b.free[size] = l[:len(l)-1]
		b.mu.Unlock()
		return buf[:n]
	}
	b.mu.Unlock()
	return alignedBuf(size)[:n]
}

// payloadAlign is the alignment of the byte at offset frameLen of every
// buffer the pool makes, where a message's payload starts. The kernel
// copies file pages into a destination that starts a few bytes into a
// cache line (buf+8) at a third of the speed it copies them to an aligned
// one: pread of tmpfs pages into buf+8 measured 100-120 ms per 256 MiB,
// into an aligned buffer 30-35 ms, on the project's AMD EPYC VM.
const payloadAlign = 64

// alignedBuf returns a buffer of length and capacity size whose byte at
// offset frameLen is payloadAlign-aligned.
func alignedBuf(size int) []byte {
	b := make([]byte, size+payloadAlign)
	o := int(uintptr(payloadAlign)-uintptr(unsafe.Pointer(&b[frameLen]))%payloadAlign) % payloadAlign
	return b[o : o+size : o+size]
}

// put returns buf for reuse; the caller must not touch it afterwards.
func (b *Buffers) put(buf []byte) {
	if cap(buf) == 0 {
		return
	}
	b.mu.Lock()
	if l := b.free[cap(buf)]; len(l) < maxFreePerSize {
		b.free[cap(buf)] = append(l, buf[:0])
	}
	b.mu.Unlock()
}

// sizedPool hands out buffers of one capacity from a Buffers.
type sizedPool struct {
	b    *Buffers
	size int
}

// get returns a buffer of length n (n <= the pool's size).
func (p sizedPool) get(n int) []byte { return p.b.get(p.size, n) }

func (p sizedPool) put(buf []byte) { p.b.put(buf) }
