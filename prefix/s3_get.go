package prefix

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sys/unix"
)

// A fetch: every file one ranged GET per s3RangeSize, pulled by the
// streams in order, each range written at its offset of the cache file as
// it arrives and added to its CRC32C; blocks read ahead of the fetch
// (Options.Skip) are passed over, a GET for each run between them. A file of several ranges is looked
// up first: its size and stored checksum must be the manifest's, and every
// range is asked for with If-Match on its ETag, so all come from one
// version of the object. The last range to finish checks the file's
// CRC32C against the manifest and gives it its attributes.

// linkOK has nothing to check: an object store keeps no links, the
// manifest (signed) does.
func (s *s3Store) linkOK(context.Context, string, *Entry) error { return nil }

func (s *s3Store) get(ctx context.Context, dataset, dstDir string, es []Entry, o Options, prog *progress) error {
	_, err := s.transfer(ctx, dataset, dstDir, es, o.Streams, s3RangeSize, func(ctx context.Context, j *s3Job, buf []byte) error {
		return s.getRange(ctx, j, buf, o, prog)
	})
	return err
}

// getRange fetches one range into the cache file, passing over the
// blocks in place already (Options.Skip) with a GET for each run of
// blocks between them.
func (s *s3Store) getRange(ctx context.Context, j *s3Job, buf []byte, o Options, prog *progress) error {
	f := j.f
	name := s.locateKey(f.key)
	err := f.open(func() error {
		f.sums.done = o.fetchedBlock(f.e, name)
		return s.openFetch(ctx, f)
	})
	if err != nil {
		return err
	}
	sum := f.sums.from(j.off)
	get := func(from, to int64) error {
		in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &f.key}
		if from == 0 && to == f.e.Size {
			// The whole object: its stored checksum comes with it.
			in.ChecksumMode = types.ChecksumModeEnabled
		} else {
			in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", from, to-1))
			if f.etag != "" {
				in.IfMatch = aws.String(f.etag)
			}
		}
		return s.receive(ctx, in, f, from, to, sum, buf, prog)
	}
	if j.n == 0 {
		err = get(0, 0) // an empty file: its object is there, and empty
	} else {
		err = eachRun(f.e.Size, j.off, j.n, func(b int) bool { return o.skips(f.e, b) },
			func(b int, bn int64) {
				sum.skip(f.e.Blocks[b], bn)
				prog.add(bn)
			}, get)
	}
	if err != nil {
		return err
	}
	whole, last := f.done(j, sum.rangeCRC(j.off))
	if !last {
		return nil
	}
	if f.e.HasCRC && whole != f.e.CRC32C {
		return &CorruptError{Path: name, Reason: fmt.Sprintf("crc32c %08x, manifest says %08x", whole, f.e.CRC32C)}
	}
	if err := setAttrs(int(f.f.Fd()), f.e, f.local); err != nil {
		return err
	}
	o.landedAll(f.e)
	return nil
}

// receive reads one GET's body, the bytes [from, to) of the object, into
// the cache file at from, adding them to sum. A body of another length
// than asked for is corrupt; so is a whole object whose stored checksum
// is not the manifest's.
func (s *s3Store) receive(ctx context.Context, in *s3.GetObjectInput, f *s3File, from, to int64, sum *summer, buf []byte, prog *progress) error {
	name := s.locateKey(f.key)
	out, err := s.getObject(ctx, in, name)
	if err != nil {
		return err
	}
	defer out.Body.Close()
	if in.Range == nil {
		if err := s.checkStored(f, aws.ToInt64(out.ContentLength), out.ChecksumCRC32C); err != nil {
			return err
		}
	}
	for pos := from; pos < to; {
		k := min(int64(len(buf)), to-pos)
		n, err := io.ReadFull(out.Body, buf[:k])
		if n > 0 {
			if _, werr := f.f.WriteAt(buf[:n], pos); werr != nil {
				return pathErr("write", f.local, werr)
			}
			if err := sum.add(buf[:n]); err != nil {
				return err
			}
			pos += int64(n)
			prog.add(int64(n))
		}
		if err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return truncated(name, pos, f.e.Size)
			}
			return pathErr("fetch", name, s.explain(err))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// openFetch creates the cache file at full length and, for a file of
// several ranges, looks the object up.
func (s *s3Store) openFetch(ctx context.Context, f *s3File) error {
	fd, err := createDst(unix.AT_FDCWD, f.local, false)
	if err != nil {
		return pathErr("create", f.local, err)
	}
	f.f = os.NewFile(uintptr(fd), f.local)
	if err := f.f.Truncate(f.e.Size); err != nil {
		return pathErr("truncate", f.local, err)
	}
	if len(f.lens) == 1 {
		return nil
	}
	out, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &f.key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		err = s.explain(err)
		if isMissing(err) {
			return &CorruptError{Path: s.locateKey(f.key), Reason: "missing"}
		}
		return pathErr("look up", s.locateKey(f.key), err)
	}
	f.etag = aws.ToString(out.ETag)
	return s.checkStored(f, aws.ToInt64(out.ContentLength), out.ChecksumCRC32C)
}

// checkStored compares an object's size and stored CRC32C (when the
// server returned one) with the manifest's.
func (s *s3Store) checkStored(f *s3File, size int64, sum *string) error {
	name := s.locateKey(f.key)
	if size != f.e.Size {
		return &CorruptError{Path: name, Reason: fmt.Sprintf("size %d, manifest says %d", size, f.e.Size)}
	}
	if sum != nil && f.e.HasCRC && *sum != crcHeader(f.e.CRC32C) {
		return &CorruptError{Path: name, Reason: fmt.Sprintf("its stored checksum (x-amz-checksum-crc32c) is %s, manifest says %s",
			*sum, crcHeader(f.e.CRC32C))}
	}
	return nil
}

// getObject sends a GET for a data object, name in messages: a missing
// object, or one that changed under an If-Match, is the prefix copy's
// fault.
func (s *s3Store) getObject(ctx context.Context, in *s3.GetObjectInput, name string) (*s3.GetObjectOutput, error) {
	out, err := s.c.GetObject(ctx, in)
	if err == nil {
		return out, nil
	}
	switch err = s.explain(err); {
	case isMissing(err):
		return nil, &CorruptError{Path: name, Reason: "missing"}
	case isConflict(err):
		return nil, &CorruptError{Path: name, Reason: "changed while it was fetched"}
	}
	return nil, pathErr("fetch", name, err)
}

// readAt reads the bytes with one ranged GET.
func (s *s3Store) readAt(ctx context.Context, dataset string, e *Entry, off int64, buf []byte) (string, error) {
	key := s.dataKey(dataset + "/" + e.Path)
	name := s.locateKey(key)
	if len(buf) == 0 {
		return name, nil
	}
	out, err := s.getObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key,
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(buf))-1))}, name)
	if err != nil {
		return name, err
	}
	defer out.Body.Close()
	if n, err := io.ReadFull(out.Body, buf); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return name, truncated(name, off+int64(n), e.Size)
		}
		return name, pathErr("fetch", name, s.explain(err))
	}
	return name, nil
}
