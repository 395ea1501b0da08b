package job

import (
	"fmt"
	"os"
	"syscall"
)

// DropPageCache writes back dirty pages and drops the page cache, with
// the dentries and inodes, so the next reads come from the disk. Only
// root may.
func DropPageCache() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		return fmt.Errorf("drop the page cache (root only): %w", err)
	}
	return nil
}
