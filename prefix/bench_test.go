package prefix

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchTree writes files × size bytes of random data under dir/ckpt.1 and
// returns that dataset directory.
func benchTree(b testing.TB, dir string, files, size int) string {
	src := filepath.Join(dir, "ckpt.1")
	for i := range files {
		writeFile(b, filepath.Join(src, fmt.Sprintf("rank_%03d.bin", i)), size, uint64(i))
	}
	return src
}

// benchFlush measures Flush of 256 MiB over 64 files from tmpfs to a disk
// directory (b.TempDir), after an untimed warm-up that faults in the
// buffers. Each iteration writes a fresh dataset directory.
func benchFlush(b *testing.B, o Options) {
	src := benchTree(b, fastDir(b), 64, 4<<20)
	list := listed(b, src)
	dst := b.TempDir()
	if o.Buffers == nil {
		o.Buffers = NewBuffers(0)
	}
	run := func(i int) {
		if _, err := dirFlush(context.Background(), src, filepath.Join(dst, fmt.Sprint(i)), 0, list, o); err != nil {
			b.Fatal(err)
		}
	}
	run(-1)
	b.SetBytes(64 * 4 << 20)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		run(i)
		b.StopTimer()
		os.RemoveAll(filepath.Join(dst, fmt.Sprint(i)))
		b.StartTimer()
	}
}

func BenchmarkFlush(b *testing.B) {
	b.Run("crc", func(b *testing.B) { benchFlush(b, Options{CRC: true}) })
	b.Run("nocrc", func(b *testing.B) { benchFlush(b, Options{}) })
}

// BenchmarkFetch measures Fetch (CRC verified) of the same 256 MiB from a
// disk directory into tmpfs. The source stays in the page cache after the
// first read, as it would on a parallel file system client that just read
// it; TestCompareCp measures the cold case.
func BenchmarkFetch(b *testing.B) {
	src := benchTree(b, fastDir(b), 64, 4<<20)
	prefix := filepath.Join(b.TempDir(), "ckpt.1")
	es, err := dirFlush(context.Background(), src, prefix, 0, listed(b, src), Options{CRC: true})
	if err != nil {
		b.Fatal(err)
	}
	dst := fastDir(b)
	o := Options{CRC: true, Buffers: NewBuffers(0)}
	run := func(i int) {
		if err := dirFetch(context.Background(), prefix, filepath.Join(dst, fmt.Sprint(i)), es, o); err != nil {
			b.Fatal(err)
		}
	}
	run(-1)
	os.RemoveAll(filepath.Join(dst, "-1"))
	b.SetBytes(64 * 4 << 20)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		run(i)
		b.StopTimer()
		os.RemoveAll(filepath.Join(dst, fmt.Sprint(i)))
		b.StartTimer()
	}
}
