package main

import (
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
)

// The restart as the application sees it (issue 25): a new allocation
// starts the daemon with an empty cache and the checkpoint in the prefix,
// and the application reads its checkpoint as soon as the mount is there.
//
//	restart first byte: from the daemon's start until one byte of the
//	                    dataset's first large file is read through the mount
//	restart read all:   … until every file of the dataset is read through it
//	cp back+read:       cp -r of the flushed tree to tmpfs, then the same reads
//
// The page cache is dropped before each (as on a new allocation, the
// prefix's bytes come from the disk), when the bench runs as root.

// readers is how many files are read at once, as ranks would.
const readers = 4

// restartOnce times a restart with the cache gone: the first byte and the
// whole dataset read through the mount.
func (b *bench) restartOnce() (first, all sample) {
	b.stop()
	os.RemoveAll(filepath.Join(b.work, "cache"))
	os.RemoveAll(filepath.Join(b.work, "control"))
	dropCaches()
	mnt := filepath.Join(b.work, "mnt")
	t0 := time.Now()
	b.startNoWait()
	for !job.Mounted(mnt) {
		time.Sleep(time.Millisecond)
	}
	ds := filepath.Join(mnt, dataset)
	f, err := os.Open(filepath.Join(ds, largeName(0)))
	check(err)
	_, err = f.Read(make([]byte, 1))
	check(err)
	f.Close()
	first = sample{wall: time.Since(t0).Seconds()}
	readTree(ds)
	all = sample{wall: time.Since(t0).Seconds(), cpu: procCPU(b.cmd.Process.Pid)}
	b.waitLog("scrfs ready")
	return first, all
}

// cpReadOnce times cp -r of the flushed tree to tmpfs and the same reads.
func (b *bench) cpReadOnce() sample {
	back := filepath.Join(b.work, "back")
	os.RemoveAll(back)
	dropCaches()
	t0 := time.Now()
	runTimed("cp", "-r", filepath.Join(b.prefix, dataset), back)
	readTree(back)
	s := sample{wall: time.Since(t0).Seconds()}
	os.RemoveAll(back)
	return s
}

// readTree reads every regular file below dir, readers at a time.
func readTree(dir string) {
	var paths []string
	check(filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return err
	}))
	var wg sync.WaitGroup
	next := make(chan string)
	for range readers {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for p := range next {
				f, err := os.Open(p)
				check(err)
				_, err = io.CopyBuffer(io.Discard, onlyReader{f}, buf)
				check(err)
				f.Close()
			}
		})
	}
	for _, p := range paths {
		next <- p
	}
	close(next)
	wg.Wait()
}

// onlyReader hides a file's WriteTo, so reads go through the buffer.
type onlyReader struct{ io.Reader }

// dropCaches drops the page cache (root only; otherwise the reads may
// come from memory, and the report says so).
func dropCaches() {
	if err := job.DropPageCache(); err != nil && !droppedWarned {
		droppedWarned = true
		println("flushbench: cannot drop the page cache (not root?): the restart figures may read from memory")
	}
}

var droppedWarned bool
