package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/scrfs/scrfs/internal/s3test"
	"github.com/scrfs/scrfs/internal/testutil"
)

// The prefix in object storage: real daemons against a real S3 server
// (versitygw on loopback, internal/s3test), pointed at it by the AWS_*
// variables alone, as a cloud GPU cluster is pointed at its bucket.

// s3Cluster prepares n daemons whose prefix is s3://<bucket>/<path> of srv.
func s3Cluster(t *testing.T, srv *s3test.Server, n int, path string, env ...string) *Cluster {
	t.Helper()
	return NewCluster(t, n, append(append([]string{"SCRFS_PATHS_PREFIX=" + srv.Prefix(path),
		"SCRFS_DATASETS_COMPLETE=marker:COMPLETE", "SCRFS_FLUSH_EVERY=0"}, srv.Env()...), env...)...)
}

// objectSums returns the sha256 of every object below <path>/<dataset>/,
// by the path below it: what the bucket holds of the dataset's files.
func objectSums(t *testing.T, srv *s3test.Server, path, dataset string) map[string]string {
	t.Helper()
	c, ctx := srv.Client(), context.Background()
	pfx := path + "/" + dataset + "/"
	out := map[string]string{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(s3test.Bucket), Prefix: &pfx})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		must(t, err)
		for _, o := range page.Contents {
			obj, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3test.Bucket), Key: o.Key})
			must(t, err)
			h := sha256.New()
			_, err = io.Copy(h, obj.Body)
			obj.Body.Close()
			must(t, err)
			out[strings.TrimPrefix(*o.Key, pfx)] = hex.EncodeToString(h.Sum(nil))
		}
	}
	return out
}

// regularOnly drops links from a tree's sums: a bucket keeps no links (the
// manifest does).
func regularOnly(sums map[string]string) map[string]string {
	out := map[string]string{}
	for p, s := range sums {
		if !strings.HasPrefix(s, "-> ") {
			out[p] = s
		}
	}
	return out
}

// completeOn marks dataset complete from node 1 and waits until every node
// has it protected.
func completeOn(t *testing.T, c *Cluster, dataset string) {
	t.Helper()
	must(t, os.WriteFile(c.Nodes[1].Path(dataset, "COMPLETE"), nil, 0o644))
	c.WaitState(60*time.Second, dataset, "protected")
}

// restartWiped stops every node, wipes its cache and starts the job again.
func restartWiped(t *testing.T, c *Cluster) {
	t.Helper()
	stopWiped(t, c)
	c.Start()
}

// stopWiped stops every node and wipes its cache.
func stopWiped(t *testing.T, c *Cluster) {
	t.Helper()
	for _, n := range c.Nodes {
		must(t, n.Stop())
		wipe(t, n)
	}
}

// TestS3FlushFetch: four daemons flush a checkpoint to the bucket, each
// its own files as objects of the tree's names; `scrfs list` shows it;
// every cache is wiped and the job of four fetches it back byte for byte;
// then a job of two nodes over the same prefix fetches it too (each node
// the parts of two) and every mount shows all of it.
func TestS3FlushFetch(t *testing.T) {
	srv := s3test.Start(t)
	requireFUSE(t)
	c := s3Cluster(t, srv, 4, "job1").Start()
	writeNodeData(t, c, "ckpt.1")
	writeRandom(t, c.Nodes[2].Path("ckpt.1", "big", "model.bin"), 40<<20+3, 7) // multipart, several ranges
	completeOn(t, c, "ckpt.1")
	sums := clusterSums(t, c, "ckpt.1")
	all, _ := union(t, sums)
	if out, errs, code := c.Nodes[3].CLI("flush", "--wait", "ckpt.1"); code != 0 || !strings.Contains(out, "ckpt.1 flushed to "+srv.Prefix("job1/ckpt.1")) {
		t.Fatalf("scrfs flush --wait: exit %d: %s%s", code, out, errs)
	}
	sameSums(t, "objects of ckpt.1", objectSums(t, srv, "job1", "ckpt.1"), regularOnly(all))
	if out, errs, code := c.Nodes[1].CLI("list"); code != 0 || !strings.Contains(out, "prefix "+srv.Prefix("job1")) ||
		!strings.Contains(out, "ckpt.1") || !strings.Contains(out, "complete") {
		t.Fatalf("scrfs list: exit %d: %s%s", code, out, errs)
	}

	restartWiped(t, c)
	c.WaitCompleted(time.Second, "ckpt.1")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.1 fetched on node %d", i), withoutMeta(treeSums(t, n.CacheDir("ckpt.1"))), sums[i])
	}
	for _, n := range c.Nodes {
		must(t, n.Stop())
	}

	two := s3Cluster(t, srv, 2, "job1").Start()
	two.WaitCompleted(60*time.Second, "ckpt.1")
	two.WaitState(60*time.Second, "ckpt.1", "protected")
	for i, n := range two.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.1 through node %d's mount of a job of two", i), treeSums(t, n.Path("ckpt.1")), all)
	}
}

// TestS3ServerKilledMidUpload: the server dies while the nodes upload (a
// throttled flush, so it is still going): the flush fails, and at no point
// does `scrfs list` or a fetch see the dataset complete. Once the server is
// back the flush is retried and succeeds, and a wiped job fetches it.
func TestS3ServerKilledMidUpload(t *testing.T) {
	srv := s3test.Start(t)
	requireFUSE(t)
	c := s3Cluster(t, srv, 2, "kill", "SCRFS_FLUSH_BANDWIDTH=8MB").Start()
	for i, n := range c.Nodes {
		writeRandom(t, n.Path("ckpt.1", fmt.Sprintf("rank_%d.bin", i)), 48<<20, uint64(i+1))
	}
	completeOn(t, c, "ckpt.1")
	sums := clusterSums(t, c, "ckpt.1")

	done := make(chan struct{})
	var out, errs string
	var code int
	go func() {
		defer close(done)
		out, errs, code = c.Nodes[0].CLI("flush", "--wait", "ckpt.1")
	}()
	testutil.Eventually(t, 30*time.Second, "node 1 uploading ckpt.1", func() bool {
		d := c.Nodes[1].Dataset("ckpt.1")
		return d != nil && d.Flush != nil && d.Flush.DoneBytes > 8<<20
	})
	srv.Kill()
	<-done
	if code == 0 || !strings.Contains(errs, "cannot reach the object store at "+srv.URL()) {
		t.Fatalf("scrfs flush --wait with the server killed: exit %d: %s%s", code, out, errs)
	}
	// The round ends once every node's retries gave up.
	c.WaitAll(60*time.Second, "dataset flush failed", "dataset=ckpt.1")
	must(t, srv.Restart())
	if out, _, code := c.Nodes[0].CLI("list"); code != 0 || strings.Contains(out, "complete") {
		t.Fatalf("scrfs list after the failed flush: exit %d\n%s", code, out)
	}
	if out, errs, code := c.Nodes[1].CLI("flush", "--wait", "--force", "ckpt.1"); code != 0 {
		t.Fatalf("scrfs flush --wait --force once the server is back: exit %d: %s%s", code, out, errs)
	}
	all, _ := union(t, sums)
	sameSums(t, "objects of ckpt.1", objectSums(t, srv, "kill", "ckpt.1"), regularOnly(all))
	restartWiped(t, c)
	c.WaitCompleted(time.Second, "ckpt.1")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.1 fetched on node %d", i), withoutMeta(treeSums(t, n.CacheDir("ckpt.1"))), sums[i])
	}
}

// TestS3ObjectChanged: objects changed on the server behind scrfs's back
// are refused at fetch, and the job falls back: ckpt.3's file replaced and
// its manifest patched to match (the MAC fails), ckpt.2's file replaced
// with a checksum of its own (the CRC32C fails); ckpt.1 is fetched.
func TestS3ObjectChanged(t *testing.T) {
	srv := s3test.Start(t)
	requireFUSE(t)
	c := s3Cluster(t, srv, 2, "chg").Start()
	var sums1 []map[string]string
	for i, ds := range []string{"ckpt.1", "ckpt.2", "ckpt.3"} {
		writeRandom(t, c.Nodes[1].Path(ds, "state.bin"), 100_000, uint64(i+10))
		completeOn(t, c, ds)
		if i == 0 {
			sums1 = clusterSums(t, c, ds)
		}
		if out, errs, code := c.Nodes[0].CLI("flush", "--wait", ds); code != 0 {
			t.Fatalf("flush %s: exit %d: %s%s", ds, code, out, errs)
		}
	}
	cl, ctx := srv.Client(), context.Background()
	evil := bytes.Repeat([]byte("x"), 100_000)
	for _, ds := range []string{"ckpt.2", "ckpt.3"} {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String("chg/" + ds + "/state.bin"),
			Body: bytes.NewReader(evil), ChecksumAlgorithm: "CRC32C"})
		must(t, err)
	}
	// The manifest of ckpt.3 made to say the new checksum, as someone who
	// can write the bucket would: its MAC no longer verifies.
	key := aws.String("chg/.scrfs/manifests/ckpt.3/manifest.json")
	obj, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3test.Bucket), Key: key})
	must(t, err)
	man, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String("chg/ckpt.3/state.bin"), ChecksumMode: "ENABLED"})
	must(t, err)
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(h.ChecksumCRC32C))
	must(t, err)
	patched := patchCRC(t, man, "state.bin", hex.EncodeToString(raw))
	_, err = cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s3test.Bucket), Key: key, Body: bytes.NewReader(patched)})
	must(t, err)

	restartWiped(t, c)
	c.Nodes[0].WaitLog(time.Second, "fetch failed, recorded in the index", "dataset=ckpt.3", "MAC of the manifest")
	c.Nodes[0].WaitLog(time.Second, "fetch failed, recorded in the index", "dataset=ckpt.2", "stored checksum")
	c.WaitCompleted(time.Second, "ckpt.1")
	for i, n := range c.Nodes {
		sameSums(t, fmt.Sprintf("ckpt.1 fetched on node %d", i), withoutMeta(treeSums(t, n.CacheDir("ckpt.1"))), sums1[i])
	}
	if _, err := os.Stat(c.Nodes[1].Path("ckpt.3", "state.bin")); !os.IsNotExist(err) {
		t.Fatalf("the refused ckpt.3 is shown: %v", err)
	}
}
