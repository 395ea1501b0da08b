// Command s3bound moves a directory to or from S3 with aws-sdk-go-v2's
// transfer manager and nothing else: the bound that flushbench and
// redbench compare scrfs's object-storage prefix with. It is configured as
// scrfs configures its client, so that the comparison is of the data
// path, not of settings: the standard AWS chain (AWS_ENDPOINT_URL_S3 and
// friends, path-style with a custom endpoint), CRC32C checksums, parts of
// -part bytes, -concurrency transfers at once, and request bodies left out
// of the SigV4 signature (-unsigned, as scrfs does; as the SDK does over
// HTTPS).
//
//	s3bound -up DIR s3://bucket/prefix      upload DIR's files below prefix/
//	s3bound -down s3://bucket/prefix DIR    download prefix/'s objects into DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	tm "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
)

var (
	up          = flag.Bool("up", false, "upload DIR to s3://bucket/prefix")
	down        = flag.Bool("down", false, "download s3://bucket/prefix into DIR")
	part        = flag.Int64("part", 16<<20, "part size in bytes")
	concurrency = flag.Int("concurrency", 4, "transfers at once")
	unsigned    = flag.Bool("unsigned", true, "leave request bodies out of the SigV4 signature")
)

func main() {
	flag.Parse()
	if *up == *down || flag.NArg() != 2 {
		log.Fatal("usage: s3bound -up DIR s3://bucket/prefix | -down s3://bucket/prefix DIR")
	}
	ctx := context.Background()
	// Quiet: the SDK's debug notes (a ranged GET without a checksum)
	// would drown the benchmark's output.
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.Nop{}))
	if err != nil {
		log.Fatal(err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = o.BaseEndpoint != nil
		if *unsigned {
			o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
		}
	})
	t := tm.New(c, func(o *tm.Options) {
		o.PartSizeBytes, o.MultipartUploadThreshold, o.Concurrency = *part, *part, *concurrency
		o.ChecksumAlgorithm = tmtypes.ChecksumAlgorithmCrc32c
	})
	if *up {
		bucket, key := split(flag.Arg(1))
		_, err = t.UploadDirectory(ctx, &tm.UploadDirectoryInput{Bucket: &bucket, Source: aws.String(flag.Arg(0)),
			KeyPrefix: &key, Recursive: aws.Bool(true)})
	} else {
		bucket, key := split(flag.Arg(0))
		if err = os.MkdirAll(flag.Arg(1), 0o755); err == nil {
			_, err = t.DownloadDirectory(ctx, &tm.DownloadDirectoryInput{Bucket: &bucket, KeyPrefix: &key,
				Destination: aws.String(flag.Arg(1))})
		}
	}
	if err != nil {
		log.Fatal(err)
	}
}

// split parses s3://bucket/prefix.
func split(url string) (bucket, key string) {
	rest, ok := strings.CutPrefix(url, "s3://")
	if !ok {
		log.Fatal(fmt.Errorf("%q is not s3://bucket/prefix", url))
	}
	bucket, key, _ = strings.Cut(rest, "/")
	return bucket, key
}
