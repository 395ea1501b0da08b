package namespace

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/record"
	"github.com/scrfs/scrfs/redfile"
	"github.com/scrfs/scrfs/schemes"
)

// A holder checks a whole file against the CRC32C its redundancy file
// recorded before it serves the first range of it, so that a reader never
// sees a byte that differs from what was protected, whichever range it
// asks for; the same pass gives each block's CRC32C, which its piece
// carries for the trip (wire.go). A request for a whole file not checked
// yet is served by that pass itself.
// Complete datasets do not change, so a file checked once is not checked
// again while it is the same file (inode, size and time of change).

// fileID tells whether a file checked once is still the same.
type fileID struct {
	ino, size int64
	ctime     syscall.Timespec
}

// verifiedFile is a file checked against its record, with the CRC32C of
// each of its blocks for the pieces that carry them. Range requests for a
// file being checked wait for that one check.
type verifiedFile struct {
	id     fileID
	done   chan struct{} // closed when blocks or err is set
	blocks []uint32
	err    error
}

// verify checks the file f, path p of member mem's share kept in dir, once.
// If this call is the one that checks it and each is not nil, each is
// given every piece of the file, with its CRC32C, as the check reads it,
// and sent reports that it was: a whole file is checked as it is sent, in
// one pass (its reader counts the pieces only once the call succeeded).
func (n *Namespace) verify(dataset, dir string, mem *record.Member, p string, f *os.File,
	each func(crc uint32, piece []byte) error) (vf *verifiedFile, sent bool, err error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil, false, fmt.Errorf("node %d: stat %s: %w", n.self, p, err)
	}
	id := fileID{ino: int64(st.Ino), size: st.Size, ctime: st.Ctim}
	key := mem.ID + "/" + p
	n.mu.Lock()
	vf = n.verified[dataset][key]
	owner := vf == nil || vf.id != id
	if owner {
		vf = &verifiedFile{id: id, done: make(chan struct{})}
		if n.verified[dataset] == nil {
			n.verified[dataset] = map[string]*verifiedFile{}
		}
		n.verified[dataset][key] = vf
	}
	n.mu.Unlock()
	if !owner {
		select {
		case <-vf.done:
			return vf, false, vf.err
		default:
		}
		if each != nil {
			// A whole file being checked for another reader: check it
			// again as it is sent rather than send it only after.
			_, err := n.check(dataset, dir, mem, p, f, st.Size, each)
			return nil, true, err
		}
		<-vf.done
		return vf, false, vf.err
	}
	vf.blocks, vf.err = n.check(dataset, dir, mem, p, f, st.Size, each)
	if vf.err != nil {
		n.mu.Lock()
		if n.verified[dataset][key] == vf {
			delete(n.verified[dataset], key) // the next request checks again
		}
		n.mu.Unlock()
	}
	close(vf.done)
	return vf, each != nil, vf.err
}

// check reads file f (size bytes) whole, giving each piece to each when
// set, compares its CRC32C with the one recorded, if any, and returns its
// blocks' CRC32C.
func (n *Namespace) check(dataset, dir string, mem *record.Member, p string, f *os.File, size int64,
	each func(uint32, []byte) error) ([]uint32, error) {
	want, known, err := recordedCRC(dir, mem, p)
	if err != nil {
		return nil, err
	}
	var whole uint32
	blocks := make([]uint32, 0, (size+blockSize-1)/blockSize)
	err = readAhead(f, 0, size, true, func(_ int64, c uint32, b []byte) error {
		blocks = append(blocks, c)
		whole = crc32c.Combine(whole, c, int64(len(b)))
		if each != nil {
			return each(c, b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if known && whole != want {
		return nil, fmt.Errorf("%s/%s on node %d no longer matches the CRC32C recorded when it was protected: %w",
			dataset, p, n.self, schemes.ErrCorrupt)
	}
	return blocks, nil
}

// recordedCRC returns the CRC32C the member's redundancy file recorded for
// file p, if the scheme computed one.
func recordedCRC(dir string, mem *record.Member, p string) (uint32, bool, error) {
	list, err := redfile.MemberFiles(dir, mem.Node)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil // not protected (yet): the transfer's own CRC only
	}
	if err != nil {
		return 0, false, err
	}
	for _, f := range list {
		if f.Path == p && f.Type == files.Regular {
			return f.CRC32C, f.HasCRC, nil
		}
	}
	return 0, false, fmt.Errorf("%s is not a file of member %.12s: %w", p, mem.ID, ErrNotHeld)
}
