package prefix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/scrfs/scrfs/internal/sleep"
	"github.com/scrfs/scrfs/layout"
)

// s3Store is a prefix in S3-compatible object storage, "s3://bucket/path":
// a dataset's files are the objects <path>/<dataset>/<file>, usable without
// scrfs (aws s3 sync), and the metadata is below <path>/.scrfs/ as in a
// directory. The client is aws-sdk-go-v2's, configured as every AWS tool
// is: region, credentials (keys, shared config and profiles, web identity
// on Kubernetes, instance roles) and endpoint from the standard chain
// (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL point it at any S3-compatible
// server, which is then addressed path-style). Requests are retried with
// backoff on timeouts, throttling and 5xx answers.
//
// Object storage has no rename, no fsync, no directories and no links: an
// object appears whole when its upload completes (a multipart upload only
// at its completion), so objects are written under their final names, and
// what makes a dataset exist is the index entry written last. Directories
// and symbolic links are kept in the manifest alone. Each object carries
// its CRC32C as its native checksum (x-amz-checksum-crc32c, of the whole
// object also for multipart uploads), computed as the bytes are read and
// checked by the server on upload; a fetch compares the stored checksum and
// the bytes received with the manifest. The index is replaced by
// conditional writes (If-Match on the ETag read, If-None-Match for the
// first), retried on a conflict, so two writers never silently overwrite
// each other's change.
type s3Store struct {
	url      string
	bucket   string
	key      string // the key prefix: "" or "path/"
	endpoint string // for messages
	c        *s3.Client
	log      *slog.Logger
	// bufs are the part buffers: a part is read whole before it is sent,
	// its checksum going in the request's headers.
	bufs *Buffers
}

// Object sizes: S3 allows at most 10,000 parts of at least 5 MiB (but the
// last) per object.
const (
	// s3PartSize is the part of a large file one stream uploads, and the
	// size up to which a file is one PUT. 16 MiB keeps a few streams'
	// buffers small while a part's request overhead stays below 1%.
	s3PartSize = 16 << 20
	// s3RangeSize is the range of a large object one stream fetches.
	s3RangeSize = 16 << 20
	s3MaxParts  = 10000
)

// s3 retries: the SDK's standard retryer (exponential backoff with jitter
// on timeouts, throttling, 5xx and broken connections), with more attempts
// and a shorter longest wait than its defaults, and no retry quota: a
// flush's streams fail together when the server goes away and must not
// use up each other's retries.
const (
	s3Attempts   = 6
	s3MaxBackoff = 5 * time.Second
)

func newS3Store(ctx context.Context, url string, lg *slog.Logger) (store, error) {
	bucket, key, err := layout.ParseS3Prefix(url)
	if err != nil {
		return nil, fmt.Errorf("prefix: %w", err)
	}
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = maxStreams
		// A server that stops answering is a timeout, retried, not a
		// hang.
		t.ResponseHeaderTimeout = time.Minute
	}).WithDialerOptions(func(d *net.Dialer) { d.Timeout = 10 * time.Second })
	cfg, err := awsconfig.LoadDefaultConfig(ctx,
		awsconfig.WithHTTPClient(hc),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts, o.MaxBackoff, o.RateLimiter = s3Attempts, s3MaxBackoff, ratelimit.None
			})
		}),
		awsconfig.WithLogger(logging.LoggerFunc(func(_ logging.Classification, format string, v ...any) {
			lg.Warn("object storage", "prefix", url, "msg", fmt.Sprintf(format, v...))
		})),
		awsconfig.WithClientLogMode(aws.LogRetries),
		// scrfs sends and checks CRC32C itself; the SDK is not to add
		// CRC32 of its own to every request and response.
		awsconfig.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		awsconfig.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	)
	if err != nil {
		return nil, fmt.Errorf("prefix %s: AWS configuration: %w", url, err)
	}
	if cfg.Region == "" {
		// S3-compatible servers mostly ignore the region, but SigV4 needs
		// one; AWS's own default region.
		cfg.Region = "us-east-1"
	}
	s := &s3Store{url: strings.TrimSuffix(url, "/"), bucket: bucket, key: key, log: lg, bufs: NewBuffers(s3PartSize)}
	s.c = s3.NewFromConfig(cfg, func(o *s3.Options) {
		if o.BaseEndpoint != nil {
			// A custom endpoint is an S3-compatible server: buckets in the
			// path, not in the host name, which needs no DNS for them.
			o.UsePathStyle = true
			s.endpoint = *o.BaseEndpoint
		}
	})
	if s.endpoint == "" {
		s.endpoint = "AWS S3 in " + cfg.Region
	}
	return s, nil
}

func (s *s3Store) String() string           { return s.url }
func (s *s3Store) locate(rel string) string { return s.url + "/" + rel }
func (s *s3Store) close() error             { return nil }

// dataKey and metaKey are the object names of a dataset's file and of
// metadata.
func (s *s3Store) dataKey(rel string) string  { return s.key + rel }
func (s *s3Store) metaKey(name string) string { return s.key + layout.MetaDir + "/" + name }

// check looks the bucket up with the credentials.
func (s *s3Store) check(ctx context.Context) error {
	_, err := s.c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	if err = s.explain(err); isMissing(err) {
		// HEAD answers have no body to name the error: 404 is the bucket.
		return fmt.Errorf("bucket %s does not exist at %s (create it, or correct paths.prefix)", s.bucket, s.endpoint)
	}
	return err
}

// explain turns the client's errors into ones that say what to fix: a
// missing object wraps fs.ErrNotExist; a wrong endpoint, a missing bucket
// and refused credentials say so and name the settings.
func (s *s3Store) explain(err error) error {
	if err == nil {
		return nil
	}
	var (
		api    smithy.APIError
		resp   *awshttp.ResponseError
		op     *net.OpError
		dns    *net.DNSError
		nsk    *types.NoSuchKey
		nf     *types.NotFound
		nsb    *types.NoSuchBucket
		code   string
		status int
	)
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	if errors.As(err, &resp) {
		status = resp.HTTPStatusCode()
	}
	switch {
	case errors.As(err, &nsb) || code == "NoSuchBucket":
		return fmt.Errorf("bucket %s does not exist at %s (create it, or correct paths.prefix): %w", s.bucket, s.endpoint, err)
	case errors.As(err, &nsk) || errors.As(err, &nf) || code == "NoSuchKey" || status == http.StatusNotFound:
		return fmt.Errorf("%w (%v)", fs.ErrNotExist, err)
	case status == http.StatusForbidden || code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch":
		return fmt.Errorf("access denied by %s (HTTP 403 %s): check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"AWS_PROFILE, web identity) and what they may do in bucket %s: %w", s.endpoint, code, s.bucket, err)
	case errors.As(err, &dns) || errors.As(err, &op) && (op.Op == "dial" || op.Op == "read" && status == 0):
		return fmt.Errorf("cannot reach the object store at %s (check AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, and AWS_REGION): %w", s.endpoint, err)
	}
	return err
}

func (s *s3Store) readMeta(ctx context.Context, name string) ([]byte, error) {
	b, _, err := s.getSmall(ctx, s.metaKey(name))
	return b, err
}

// getSmall reads a metadata object whole, with its ETag.
func (s *s3Store) getSmall(ctx context.Context, key string) ([]byte, string, error) {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return nil, "", s.explain(err)
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > maxMetadataSize {
		return nil, "", errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(out.Body, maxMetadataSize+1))
	if err != nil {
		return nil, "", s.explain(err)
	}
	if len(b) > maxMetadataSize {
		return nil, "", errTooLarge
	}
	return b, aws.ToString(out.ETag), nil
}

var errTooLarge = errors.New("metadata larger than 1 GiB: not written by scrfs")

// writeMeta puts the object: an object appears whole or not at all.
func (s *s3Store) writeMeta(ctx context.Context, name string, b []byte) error {
	_, err := s.put1(ctx, s.metaKey(name), b, nil, nil)
	return err
}

// put1 uploads b as one object, its CRC32C sent as its checksum, on the
// conditions ifMatch and ifNoneMatch (nil: none), and returns its ETag.
func (s *s3Store) put1(ctx context.Context, key string, b []byte, ifMatch, ifNoneMatch *string) (string, error) {
	out, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: newBody(b),
		ContentLength: aws.Int64(int64(len(b))), ChecksumCRC32C: aws.String(crcHeader(crcOf(b))),
		IfMatch: ifMatch, IfNoneMatch: ifNoneMatch}, unsignedPayload)
	if err != nil {
		return "", s.explain(err)
	}
	return aws.ToString(out.ETag), nil
}

// sweep has nothing to do: an object exists only once its upload
// completed, under its final key.
func (s *s3Store) sweep(context.Context, string) error { return nil }

func (s *s3Store) removeMeta(ctx context.Context, dataset string) error {
	return s.removeAll(ctx, s.metaKey(manifestsOf(dataset))+"/")
}

// removeData removes the dataset's objects and aborts the uploads a
// crashed or killed flush left unfinished, which the bucket would keep
// (and bill) otherwise.
func (s *s3Store) removeData(ctx context.Context, dataset string) error {
	pfx := s.dataKey(dataset) + "/"
	if err := s.abortUploads(ctx, pfx); err != nil {
		return err
	}
	return s.removeAll(ctx, pfx)
}

// removeAll deletes every object whose name starts with pfx.
func (s *s3Store) removeAll(ctx context.Context, pfx string) error {
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &pfx})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.explain(err)
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, 0, len(page.Contents))
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		out, err := s.c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &s.bucket,
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return s.explain(err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("delete %s: %s: %s (and %d more)", s.locateKey(aws.ToString(e.Key)),
				aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors)-1)
		}
	}
	return nil
}

// abortUploads aborts the multipart uploads of objects below pfx.
func (s *s3Store) abortUploads(ctx context.Context, pfx string) error {
	in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &pfx}
	for {
		out, err := s.c.ListMultipartUploads(ctx, in)
		if err != nil {
			return s.explain(err)
		}
		for _, u := range out.Uploads {
			_, err := s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: u.Key, UploadId: u.UploadId})
			if err != nil && !errors.Is(s.explain(err), fs.ErrNotExist) {
				return s.explain(err)
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// locateKey names an object in messages.
func (s *s3Store) locateKey(key string) string { return "s3://" + s.bucket + "/" + key }

// Conflicts of the index's conditional writes are retried after a pause
// that grows, as flock's polls do in a directory.
const (
	casPauseMin = 5 * time.Millisecond
	casPauseMax = 500 * time.Millisecond
)

// updateIndex reads the index with its ETag, runs f, and writes the result
// only if the index is still the one read (If-Match; If-None-Match: * when
// there was none): a writer that lost the race reads again and reapplies
// f. A server that ignores the conditions would let the last writer win;
// every S3 this was tried with (AWS S3, versitygw) honours them.
func (s *s3Store) updateIndex(ctx context.Context, _ *slog.Logger, f func([]byte) ([]byte, error)) error {
	key := s.metaKey(indexName)
	b := sleep.Backoff{Min: casPauseMin, Max: casPauseMax, Jitter: true}
	for {
		cur, etag, err := s.getSmall(ctx, key)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			cur, etag = nil, ""
		case err != nil:
			return err
		}
		out, err := f(cur)
		if err != nil {
			return err
		}
		ifMatch, ifNone := aws.String(etag), (*string)(nil)
		if etag == "" {
			ifMatch, ifNone = nil, aws.String("*")
		}
		_, err = s.put1(ctx, key, out, ifMatch, ifNone)
		if !isConflict(err) {
			return err
		}
		s.log.Debug("the prefix index changed while it was updated; updating again", "prefix", s.url)
		if err := b.Wait(ctx); err != nil {
			return fmt.Errorf("update the index: %w", err)
		}
	}
}

// isConflict reports a conditional write that lost: the object changed
// (412), or another conditional write to it was under way (409).
func isConflict(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) && (api.ErrorCode() == "PreconditionFailed" || api.ErrorCode() == "ConditionalRequestConflict") {
		return true
	}
	var resp *awshttp.ResponseError
	return errors.As(err, &resp) && (resp.HTTPStatusCode() == http.StatusPreconditionFailed || resp.HTTPStatusCode() == http.StatusConflict)
}

// isMissing reports an error of a missing object.
func isMissing(err error) bool { return errors.Is(err, fs.ErrNotExist) }
