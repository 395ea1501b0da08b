package schemes

import (
	"testing"
	"unsafe"
)

// TestBuffersAlignPayloads: every buffer the pool makes has its payload
// (offset frameLen) 64-byte aligned and exactly the capacity asked for,
// so it goes back to the same free list.
func TestBuffersAlignPayloads(t *testing.T) {
	b := NewBuffers()
	for _, size := range []int{frameLen + 1, 4096 + crcFrameLen, 1<<20 + crcFrameLen} {
		for range 4 {
			buf := b.get(size, size/2)
			if len(buf) != size/2 || cap(buf) != size {
				t.Fatalf("get(%d, %d): len %d cap %d", size, size/2, len(buf), cap(buf))
			}
			if a := uintptr(unsafe.Pointer(&buf[:cap(buf)][frameLen])) % payloadAlign; a != 0 {
				t.Fatalf("get(%d): payload at %d bytes past a %d-byte boundary", size, a, payloadAlign)
			}
			defer b.put(buf)
		}
	}
}
