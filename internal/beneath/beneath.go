// Package beneath opens paths below a directory descriptor the way a
// cache that other users' programs write into must: without following a
// symlink anywhere on the way and without leaving the directory, in pieces
// short enough for one system call each (a path inside a checkpoint may be
// longer than PATH_MAX: the kernel hands FUSE one name at a time).
package beneath

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxAt is the longest path one system call accepts (PATH_MAX, 4096,
// counts the terminating NUL). Longer directory paths are opened in pieces.
const maxAt = 4096 - 1

// OpenDir opens directory p, a path below dirfd ("" for dirfd itself, as a
// new descriptor), as an O_PATH descriptor, refusing symlinks and anything
// outside dirfd. The caller closes it.
func OpenDir(dirfd int, p string) (int, error) {
	if p == "" {
		p = "."
	}
	cur, own := dirfd, false
	for p != "" {
		piece := p
		p = ""
		if len(piece) > maxAt {
			// Names are at most 255 bytes, so a separator comes well before.
			i := strings.LastIndexByte(piece[:maxAt], '/')
			piece, p = piece[:i], piece[i+1:]
		}
		fd, err := unix.Openat2(cur, piece, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
		})
		if own {
			syscall.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur, own = fd, true
	}
	return cur, nil
}
