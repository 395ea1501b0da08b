package job

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Poll calls done every millisecond until it reports true, fails, or two
// minutes pass.
func Poll(ctx context.Context, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// TrashDir returns where node n's daemon moves an evicted dataset of job
// jobID before deleting it in the background.
func (n *Node) TrashDir(jobID string) string {
	return filepath.Join(n.CacheDir(jobID), ".scrfs", "trash")
}

// AwaitDeleted waits until no node of c has an evicted dataset of job
// jobID left to delete, so that deleting it runs into no measurement.
func (c *Cluster) AwaitDeleted(ctx context.Context, jobID string) error {
	for _, n := range c.Nodes {
		d := n.TrashDir(jobID)
		err := Poll(ctx, func() (bool, error) {
			entries, err := os.ReadDir(d)
			if os.IsNotExist(err) {
				return true, nil
			}
			return len(entries) == 0, err
		})
		if err != nil {
			return fmt.Errorf("evicted dataset not deleted from %s: %w", d, err)
		}
	}
	return nil
}
