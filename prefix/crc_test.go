package prefix

import (
	"testing"

	"github.com/scrfs/scrfs/internal/crc32c"
)

func BenchmarkCRC32C(b *testing.B) {
	buf := make([]byte, DefaultBufferSize)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	crc32c.Update(0, buf) // warm-up: fault the buffer in
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	var c uint32
	for b.Loop() {
		c = crc32c.Update(c, buf)
	}
	_ = c
}
