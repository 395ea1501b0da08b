package prefix

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
)

// An upload: every file a job (one PUT) or, above s3PartSize, a multipart
// upload whose parts are jobs, all pulled by Options.Streams workers in
// order, largest files first so their parts spread over the streams. A
// part is read into the stream's buffer in pieces, each paced by the
// limiter and added to the part's CRC32C as it arrives; the part is then
// sent with that checksum, which the server checks. The last part of a
// file to finish completes its upload with the CRC32C of the whole file.

// s3File is one regular file being uploaded or fetched.
type s3File struct {
	e     *Entry
	key   string // the object
	local string // its path in the cache
	lens  []int64
	crcs  []uint32
	sums  *blockSums
	left  atomic.Int32

	// Set once by the first part's stream.
	once    sync.Once
	openErr error
	f       *os.File // the cache file: read (upload) or written (fetch)
	upload  string   // multipart upload id; "" for one PUT
	etag    string   // fetch: the object's ETag, so ranges all read one version

	// mu protects parts.
	mu    sync.Mutex
	parts []types.CompletedPart
}

// open runs open once, on the first of f's pieces to start; every piece
// gets its error.
func (f *s3File) open(open func() error) error {
	f.once.Do(func() { f.openErr = open() })
	return f.openErr
}

// done records the CRC32C of piece j and reports whether it was f's last
// to finish, with the CRC32C of the whole file then.
func (f *s3File) done(j *s3Job, crc uint32) (whole uint32, last bool) {
	f.crcs[j.idx] = crc
	if f.left.Add(-1) > 0 {
		return 0, false
	}
	for i, c := range f.crcs {
		whole = crc32c.Combine(whole, c, f.lens[i])
	}
	return whole, true
}

// s3Job is one part (upload) or range (fetch) of a file.
type s3Job struct {
	f      *s3File
	idx    int
	off, n int64
}

// planS3 splits files into jobs of at most piece bytes (larger pieces for
// files that would need more than s3MaxParts), largest files first.
func planS3(list []*s3File, piece int64) []s3Job {
	sort.SliceStable(list, func(i, j int) bool { return list[i].e.Size > list[j].e.Size })
	var jobs []s3Job
	for _, f := range list {
		// Whole blocks in every piece: each block is summed by one stream.
		p := max(piece, (f.e.Size+s3MaxParts-1)/s3MaxParts)
		p = (p + BlockSize - 1) / BlockSize * BlockSize
		n := max(1, int((f.e.Size+p-1)/p))
		f.lens, f.crcs = make([]int64, n), make([]uint32, n)
		f.sums = newBlockSums(f.e.Size, nil)
		f.left.Store(int32(n))
		for i := range n {
			off := int64(i) * p
			f.lens[i] = min(f.e.Size-off, p)
			jobs = append(jobs, s3Job{f: f, idx: i, off: off, n: f.lens[i]})
		}
	}
	return jobs
}

// transfer moves the regular files of es between dataset's objects and
// their paths below dir, in pieces of piece bytes, do moving one piece, and
// closes the cache files; it returns the files, for what a failed upload
// leaves to abort.
func (s *s3Store) transfer(ctx context.Context, dataset, dir string, es []Entry, streams int, piece int64,
	do func(ctx context.Context, j *s3Job, buf []byte) error) ([]*s3File, error) {
	var list []*s3File
	for i := range es {
		if e := &es[i]; e.Type == files.Regular {
			list = append(list, &s3File{e: e, key: s.dataKey(dataset + "/" + e.Path), local: filepath.Join(dir, e.Path)})
		}
	}
	err := s.runS3(ctx, streams, planS3(list, piece), do)
	for _, f := range list {
		if f.f != nil {
			f.f.Close()
		}
	}
	return list, err
}

// runS3 runs the jobs on up to streams workers, each with a buffer of
// s.bufs, and returns the first error; the first error stops the others.
func (s *s3Store) runS3(ctx context.Context, streams int, jobs []s3Job, do func(ctx context.Context, j *s3Job, buf []byte) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range min(streams, len(jobs)) {
		wg.Go(func() {
			buf := s.bufs.get()
			defer s.bufs.put(buf)
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(jobs)) {
					return
				}
				if err := do(ctx, &jobs[i], buf); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// put uploads node's files of the dataset. Directories and links need no
// objects: the manifest holds them. On failure the unfinished multipart
// uploads are aborted; the objects already uploaded stay until
// RemoveDataset (the index does not call the dataset complete).
func (s *s3Store) put(ctx context.Context, dataset, srcDir string, _ int, es []Entry, o Options, prog *progress) error {
	list, err := s.transfer(ctx, dataset, srcDir, es, o.Streams, s3PartSize, func(ctx context.Context, j *s3Job, buf []byte) error {
		return s.putPart(ctx, j, buf, o, prog)
	})
	for _, f := range list {
		if err != nil && f.upload != "" {
			// A fresh context: the flush's may be what ended.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s3MaxBackoff*2)
			_, _ = s.c.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &f.key, UploadId: &f.upload})
			cancel()
		}
	}
	if err == nil {
		// The object's checksum is the CRC32C: recorded whatever
		// Options.CRC says.
		for _, f := range list {
			f.e.HasCRC = true
		}
	}
	return err
}

// putPart reads one part and sends it.
func (s *s3Store) putPart(ctx context.Context, j *s3Job, buf []byte, o Options, prog *progress) error {
	f := j.f
	if err := f.open(func() error { return s.openUpload(ctx, f) }); err != nil {
		return err
	}
	b := buf[:j.n]
	crc, err := readPart(ctx, f.f, j.off, b, o, f.local, f.sums)
	if err != nil {
		return err
	}
	name := s.locateKey(f.key)
	sum := aws.String(crcHeader(crc))
	if f.upload == "" {
		if _, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &f.key, Body: newBody(b),
			ContentLength: aws.Int64(j.n), ChecksumCRC32C: sum}, unsignedPayload); err != nil {
			return pathErr("upload", name, s.explain(err))
		}
	} else {
		num := aws.Int32(int32(j.idx + 1))
		out, err := s.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: &f.key, UploadId: &f.upload,
			PartNumber: num, Body: newBody(b), ContentLength: aws.Int64(j.n), ChecksumCRC32C: sum}, unsignedPayload)
		if err != nil {
			return pathErr("upload part of", name, s.explain(err))
		}
		f.mu.Lock()
		f.parts = append(f.parts, types.CompletedPart{ETag: out.ETag, PartNumber: num, ChecksumCRC32C: sum})
		f.mu.Unlock()
	}
	prog.add(j.n)
	whole, last := f.done(j, crc)
	if !last {
		return nil
	}
	f.e.CRC32C, f.e.Blocks = whole, nil
	if len(f.sums.sums) > 1 {
		f.e.Blocks = f.sums.sums
	}
	if f.upload == "" {
		return nil
	}
	sort.Slice(f.parts, func(a, b int) bool { return *f.parts[a].PartNumber < *f.parts[b].PartNumber })
	_, err = s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &f.key,
		UploadId: &f.upload, MultipartUpload: &types.CompletedMultipartUpload{Parts: f.parts},
		ChecksumCRC32C: aws.String(crcHeader(whole)), ChecksumType: types.ChecksumTypeFullObject})
	if err != nil {
		return pathErr("complete the upload of", name, s.explain(err))
	}
	f.upload = "" // done: nothing to abort
	return nil
}

// openUpload opens the cache file, checks it is as listed, and starts the
// multipart upload of a file of several parts.
func (s *s3Store) openUpload(ctx context.Context, f *s3File) error {
	in, err := os.Open(f.local)
	if err != nil {
		return pathErr("open", f.local, err)
	}
	f.f = in
	st, err := in.Stat()
	if err != nil {
		return pathErr("stat", f.local, err)
	}
	if !st.Mode().IsRegular() || st.Size() != f.e.Size {
		return pathErr("read", f.local, fmt.Errorf("changed during flush (size %d, was %d)", st.Size(), f.e.Size))
	}
	if len(f.lens) == 1 {
		return nil
	}
	out, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &f.key,
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, ChecksumType: types.ChecksumTypeFullObject})
	if err != nil {
		return pathErr("start the upload of", s.locateKey(f.key), s.explain(err))
	}
	f.upload = aws.ToString(out.UploadId)
	return nil
}

// readPart fills b from in at off in pieces of at most a copy buffer
// (Limiter.Step), each paced by the limiter and added to the file's block
// CRC32Cs as it arrives, and returns the part's CRC32C.
func readPart(ctx context.Context, in *os.File, off int64, b []byte, o Options, name string, sums *blockSums) (uint32, error) {
	sum := sums.from(off)
	for done := 0; done < len(b); {
		k := min(len(b)-done, o.Limiter.Step(DefaultBufferSize))
		waited, err := o.Limiter.Wait(ctx, k)
		o.Metrics.throttled(waited)
		if err != nil {
			return 0, err
		}
		n, err := in.ReadAt(b[done:done+k], off+int64(done))
		if n < k {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("file shrank to %d bytes during flush", off+int64(done+n))
			}
			return 0, pathErr("read", name, err)
		}
		if err := sum.add(b[done : done+k]); err != nil {
			return 0, err
		}
		done += k
	}
	return sum.rangeCRC(off), nil
}

// unsignedPayload leaves the request body out of the SigV4 signature, as
// the SDK does over HTTPS: the body's integrity is its CRC32C, a signed
// header the server checks, and hashing every byte with SHA-256 as well
// would cost more CPU than the copy.
var unsignedPayload = s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)

// crcHeader is a CRC32C as S3 writes it: base64 of its 4 big-endian bytes.
func crcHeader(c uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], c)
	return base64.StdEncoding.EncodeToString(b[:])
}

func crcOf(b []byte) uint32 { return crc32c.Update(0, b) }

// newBody is a request body the SDK can rewind for a retry.
func newBody(b []byte) io.ReadSeeker { return bytes.NewReader(b) }
