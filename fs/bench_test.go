package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkSmallFiles creates, writes (4 KiB) and closes files through a
// mount, as a checkpoint of many small files does; bench/stall and
// bench/fsbench compare the same against the cache device directly. Run it
// with -cpuprofile to see the daemon's side and the application's in one
// profile.
func BenchmarkSmallFiles(b *testing.B) {
	for _, pt := range []string{"off", "auto"} {
		b.Run("passthrough="+pt, func(b *testing.B) {
			tm := mountTest(b, mountConfig{passthrough: pt})
			dir := filepath.Join(tm.dir, "ckpt.1")
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			data := make([]byte, 4096)
			b.ResetTimer()
			for i := range b.N {
				if i%10000 == 0 {
					dir = filepath.Join(tm.dir, "ckpt.1", fmt.Sprint("d", i/10000))
					if err := os.Mkdir(dir, 0o755); err != nil {
						b.Fatal(err)
					}
				}
				fd, err := syscall.Open(filepath.Join(dir, fmt.Sprint("f", i)), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := syscall.Write(fd, data); err != nil {
					b.Fatal(err)
				}
				if err := syscall.Close(fd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
