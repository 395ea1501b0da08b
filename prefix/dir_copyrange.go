package prefix

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// The byte-moving part of the engine: one range of one file, skipping holes,
// through the stream's buffer (CRC on) or inside the kernel (CRC off).

// copyRange copies [off, off+n) of t and returns its CRC32C (0 with CRC
// off). A fetch passes over the blocks already in place (Options.Skip)
// and copies the runs of blocks between them; anything else is one run,
// so that the holes are looked for once per range (each SEEK_HOLE scans
// the page cache up to the next hole, on tmpfs up to the end of the file:
// 2.6% of the daemons' CPU when done per block).
func (c *copier) copyRange(t *fileTask, off, n int64, buf []byte) (uint32, error) {
	sum := t.sums.from(off)
	seek := t.seekData // a local copy: streams of one file must not race on it
	err := eachRun(t.size, off, n, func(b int) bool { return c.fetch && c.o.skips(t.e, b) },
		func(b int, bn int64) {
			sum.skip(t.e.Blocks[b], bn)
			c.prog.add(bn)
		},
		func(from, to int64) error { return c.copySpan(t, sum, &seek, from, to, buf) })
	if err != nil || !c.o.CRC {
		return 0, err
	}
	return sum.rangeCRC(off), nil
}

// copySpan copies [pos, end) of t, adding it to sum. Holes of the source
// are skipped: they read as zeros, so their CRC is computed arithmetically
// and the destination, already at full length, keeps them as holes.
func (c *copier) copySpan(t *fileTask, sum *summer, seek *bool, pos, end int64, buf []byte) error {
	for pos < end {
		dataEnd := end
		if *seek {
			d, err := unix.Seek(t.inFd, pos, unix.SEEK_DATA)
			switch {
			case err == unix.ENXIO: // nothing but hole up to EOF
				d = end
			case err != nil: // not supported by this file system: all data
				*seek, d = false, pos
			}
			if d > pos {
				d = min(d, end)
				if c.o.CRC {
					if err := sum.zeros(d - pos); err != nil {
						return err
					}
				}
				c.prog.add(d - pos)
				pos = d
				continue
			}
			if h, err := unix.Seek(t.inFd, pos, unix.SEEK_HOLE); err == nil && h > pos && h < end {
				dataEnd = h
			}
		}
		for pos < dataEnd {
			if err := context.Cause(c.ctx); err != nil {
				return err
			}
			k := min(int64(c.o.Limiter.Step(len(buf))), dataEnd-pos)
			waited, err := c.o.Limiter.Wait(c.ctx, int(k))
			c.o.Metrics.throttled(waited)
			if err != nil {
				return err
			}
			if err := c.copyChunk(t, pos, buf[:k]); err != nil {
				return err
			}
			if c.o.CRC {
				if err := sum.add(buf[:k]); err != nil {
					return err
				}
			}
			pos += k
			c.prog.add(k)
		}
	}
	return nil
}

// copyChunk copies len(buf) bytes at pos, through buf when the CRC needs the
// bytes, else with copy_file_range where the kernel offers it.
func (c *copier) copyChunk(t *fileTask, pos int64, buf []byte) error {
	copied := false
	if !c.o.CRC && !c.noCFR.Load() {
		var err error
		if copied, err = c.copyFileRange(t, pos, int64(len(buf))); err != nil {
			return err
		}
	}
	if !copied {
		nr, err := t.in.ReadAt(buf, pos)
		if nr < len(buf) {
			if err == nil || err == io.EOF {
				return c.truncated(t, pos+int64(nr))
			}
			return pathErr("read", t.srcName, err)
		}
		if _, err := t.out.WriteAt(buf, pos); err != nil {
			return pathErr("write", t.name, err)
		}
	}
	if c.sync {
		// Start writeback now, so the fsync at the end of the file finds
		// little left to write and the device works while we copy.
		_ = unix.SyncFileRange(t.outFd, pos, int64(len(buf)), unix.SYNC_FILE_RANGE_WRITE)
	}
	return nil
}

// copyFileRange copies n bytes at pos inside the kernel. It reports false
// (and no error) when the kernel refuses before copying anything, e.g.
// across file system types; the caller then uses read and write.
func (c *copier) copyFileRange(t *fileTask, pos, n int64) (bool, error) {
	var done int64
	for done < n {
		roff, woff := pos+done, pos+done
		k, err := unix.CopyFileRange(t.inFd, &roff, t.outFd, &woff, int(n-done), 0)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil && done == 0 && (err == unix.EXDEV || err == unix.EINVAL ||
			err == unix.ENOSYS || err == unix.EOPNOTSUPP || err == unix.EBADF):
			c.noCFR.Store(true)
			return false, nil
		case err != nil:
			return true, pathErr("copy to", t.name, err)
		case k == 0:
			return true, c.truncated(t, pos+done)
		}
		done += int64(k)
	}
	return true, nil
}

// truncated reports a source that ended at byte at before its size.
func (c *copier) truncated(t *fileTask, at int64) error {
	if c.fetch {
		return truncated(t.srcName, at, t.size)
	}
	return pathErr("read", t.srcName, fmt.Errorf("file shrank to %d bytes during flush (was %d)", at, t.size))
}
