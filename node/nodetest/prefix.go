package nodetest

import (
	"context"
	"testing"

	"github.com/scrfs/scrfs/prefix"
)

// testKey signs the prefix of every job the tests run, as one user's key
// signs all of that user's jobs.
var testKey = []byte("nodetest-prefix-0123456789abcdef")

// Prefix opens the prefix at dir (a directory, or an s3:// URL) for a
// test's jobs (node.Options.Prefix); it is closed when the test ends.
func Prefix(t testing.TB, dir string) *prefix.Prefix {
	t.Helper()
	p, err := prefix.Open(context.Background(), prefix.Config{Location: dir, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
