package prefix

import (
	"context"
	"fmt"
	"log/slog"
)

// newS3Store opens an object storage prefix.
func newS3Store(_ context.Context, url string, _ *slog.Logger) (store, error) {
	return nil, fmt.Errorf("prefix %s: object storage is not supported by this build", url)
}
