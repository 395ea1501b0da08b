package prefix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/s3test"
)

// The object store against a real S3 server (versitygw, internal/s3test).

// s3Prefix opens the prefix s3://<bucket>/<path> of srv with the tests'
// key, the server's address and keys in the environment as a daemon's.
func s3Prefix(t *testing.T, srv *s3test.Server, path string) *Prefix {
	t.Helper()
	srv.Setenv(t)
	p, err := Open(context.Background(), Config{Location: srv.Prefix(path), Key: testKey})
	must(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// TestS3RoundTrip: two nodes flush their shares of a tree (a multipart
// file, small and empty files, directories, links); the index is the
// commit; the manifest's CRC32Cs are the objects' stored checksums; a
// fetch of each share restores it byte for byte and attribute for
// attribute; the objects have the tree's names.
func TestS3RoundTrip(t *testing.T) {
	srv := s3test.Start(t)
	p := s3Prefix(t, srv, "run1")
	ctx := context.Background()
	var srcs [2]string
	for i := range srcs {
		srcs[i] = filepath.Join(fastDir(t), "ckpt.1")
		buildTree(t, srcs[i], i == 1)
	}
	// Node 1's names must not clash with node 0's.
	must(t, dirRename(srcs[1], "n1"))
	must(t, p.BeginFlush(ctx, IndexEntry{Name: "ckpt.1", ID: 1, Nodes: 2}, nil))
	var parts [2][]Entry
	for i, src := range srcs {
		es, err := p.Flush(ctx, "ckpt.1", src, i, listed(t, src), Options{Streams: 3, CRC: true})
		must(t, err)
		parts[i] = es
		must(t, p.WritePart(ctx, "ckpt.1", i, es))
	}
	if ix, _ := p.ReadIndex(ctx); ix.Datasets[0].State != StateFlushing {
		t.Fatalf("before the commit: %+v", ix.Datasets)
	}
	m, err := p.CompleteFlush(ctx, "ckpt.1", 2, []byte(`{"record":1}`), nil, nil)
	must(t, err)
	ix, err := p.ReadIndex(ctx)
	must(t, err)
	e, _ := ix.Lookup("ckpt.1")
	if e.State != StateComplete || e.Trust != Verified || e.Manifest != m.SHA256 || e.Files != m.Files {
		t.Fatalf("index entry %+v, manifest %s", e, m.SHA256)
	}
	// Every file is an object of the tree's name whose stored checksum is
	// the manifest's CRC32C.
	c := srv.Client()
	for _, es := range parts {
		for _, e := range es {
			if e.Type != files.Regular {
				continue
			}
			key := "run1/ckpt.1/" + e.Path
			h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s3test.Bucket), Key: &key, ChecksumMode: "ENABLED"})
			must(t, err)
			if aws.ToInt64(h.ContentLength) != e.Size || aws.ToString(h.ChecksumCRC32C) != crcHeader(e.CRC32C) {
				t.Errorf("%s: size %d checksum %s; manifest %d %s", key, aws.ToInt64(h.ContentLength),
					aws.ToString(h.ChecksumCRC32C), e.Size, crcHeader(e.CRC32C))
			}
		}
	}
	m2, err := p.ReadManifest(ctx, "ckpt.1", e.Manifest)
	must(t, err)
	if rec, err := p.ReadRecord(ctx, m2); err != nil || string(rec) != `{"record":1}` {
		t.Fatalf("record %q, %v", rec, err)
	}
	for i, src := range srcs {
		back := filepath.Join(fastDir(t), "ckpt.1")
		must(t, p.Fetch(ctx, "ckpt.1", back, m2.ForNodes([]int{i}), Options{Streams: 3, CRC: true}))
		want, got := treeOf(t, src), treeOf(t, back)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("node %d: fetched %s = %+v, want %+v", i, k, got[k], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("node %d: fetched %d paths, flushed %d", i, len(got), len(want))
		}
	}
	// Removed, nothing is left of it.
	must(t, p.RemoveDataset(ctx, "ckpt.1", nil))
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s3test.Bucket), Prefix: aws.String("run1/")})
	must(t, err)
	for _, o := range out.Contents {
		if k := aws.ToString(o.Key); k != "run1/.scrfs/index.json" {
			t.Errorf("left after RemoveDataset: %s", k)
		}
	}
}

// dirRename renames every top-level entry of dir to prefix+name.
func dirRename(dir, prefix string) error {
	es, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := os.Rename(e, filepath.Join(dir, prefix+filepath.Base(e))); err != nil {
			return err
		}
	}
	return nil
}

// TestS3IndexConflicts: writers on several nodes update one index at
// once; conditional writes make every update land.
func TestS3IndexConflicts(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		p := s3Prefix(t, srv, "cas")
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("ckpt.%d-%d", w, i)
				errs <- p.UpdateIndex(ctx, nil, func(ix *Index) error {
					return ix.Put(IndexEntry{Name: name, State: StateFlushing})
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	ix, err := s3Prefix(t, srv, "cas").ReadIndex(ctx)
	must(t, err)
	if len(ix.Datasets) != writers*each {
		t.Fatalf("%d datasets in the index, want %d: updates were lost", len(ix.Datasets), writers*each)
	}
}

// TestS3ObjectChanged: an object replaced behind scrfs's back, however it
// is replaced, fails the fetch as corrupt, naming it: a small object whose
// stored checksum is the new bytes', a large one (fetched in ranges) of
// the same size, and one that is gone.
func TestS3ObjectChanged(t *testing.T) {
	srv := s3test.Start(t)
	p := s3Prefix(t, srv, "x")
	ctx := context.Background()
	src := filepath.Join(fastDir(t), "ckpt.2")
	writeFile(t, filepath.Join(src, "small.bin"), 5000, 1)
	writeFile(t, filepath.Join(src, "large.bin"), 3*s3RangeSize+5, 2)
	c := srv.Client()
	for _, tc := range []struct {
		name, key string
		change    func(key string)
		reason    string
	}{
		{"small", "small.bin", func(key string) { putObject(t, c, key, bytes.Repeat([]byte{1}, 5000)) }, "stored checksum"},
		{"large", "large.bin", func(key string) { putObject(t, c, key, bytes.Repeat([]byte{2}, 3*s3RangeSize+5)) }, "stored checksum"},
		{"gone", "small.bin", func(key string) {
			_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s3test.Bucket), Key: &key})
			must(t, err)
		}, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := p.Flush(ctx, "ckpt.2", src, 0, listed(t, src), Options{CRC: true})
			must(t, err)
			must(t, p.Fetch(ctx, "ckpt.2", filepath.Join(fastDir(t), "ckpt.2"), es, Options{CRC: true}))
			key := "x/ckpt.2/" + tc.key
			tc.change(key)
			err = p.Fetch(ctx, "ckpt.2", filepath.Join(fastDir(t), "ckpt.2"), es, Options{CRC: true})
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != srv.Prefix(key) || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("fetch after the object changed: %v", err)
			}
		})
	}
}

func putObject(t *testing.T, c *s3.Client, key string, b []byte) {
	t.Helper()
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(s3test.Bucket), Key: &key,
		Body: bytes.NewReader(b), ChecksumAlgorithm: "CRC32C"})
	must(t, err)
}

// TestS3Errors: what a user gets wrong says so: an endpoint nothing
// listens on, a bucket that does not exist, keys the server refuses.
func TestS3Errors(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		env  map[string]string
		loc  string
		want string
	}{
		{"endpoint", map[string]string{"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1"}, srv.Prefix("p"), "cannot reach the object store at http://127.0.0.1:1"},
		{"bucket", nil, "s3://no-such-bucket/p", "bucket no-such-bucket does not exist"},
		{"credentials", map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong"}, srv.Prefix("p"), "access denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Setenv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			p, err := Open(ctx, Config{Location: tc.loc, Key: testKey})
			must(t, err)
			defer p.Close()
			if err := p.Check(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check: %v, want %q", err, tc.want)
			}
			if _, err := p.ReadIndex(ctx); err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, fs.ErrNotExist) {
				t.Errorf("ReadIndex: %v, want %q", err, tc.want)
			}
		})
	}
}
