package schemes

import (
	"fmt"
	"strings"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/redfile"
)

// Inventory is what Inspect found for one member.
type Inventory struct {
	// File is the redundancy file Inspect looked for.
	File string
	// Header is its header, nil if it is missing or unreadable.
	Header *redfile.Header
	// Files and DataBytes count the member's recorded entries and logical
	// bytes (0 without a header).
	Files     int
	DataBytes int64
	// Problems lists application entries that are missing or differ from
	// their record (type, size, symlink target, hard link).
	Problems []string
}

// Inspect checks, without the network, whether member m can take part in a
// rebuild as a survivor — the restart inventory. It reads the member's
// redundancy file completely: preamble, header and trailer CRCs, that the
// header belongs to p and m, and every data block's CRC; then it checks that
// every application entry the header records exists with the recorded type
// and size (file contents are not read; Rebuild checks those against their
// CRCs). A nil error means the member is intact. Otherwise the error wraps
// fs.ErrNotExist (no redundancy file), ErrCorrupt (damaged file) or
// ErrMismatch (foreign header, or application files missing or changed), and
// the Inventory holds what could be determined. The member should then be
// listed as lost.
func Inspect(p Params, m Member) (*Inventory, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := m.validate(p); err != nil {
		return nil, err
	}
	inv := &Inventory{File: redPath(p, m)}
	rf, err := redfile.Open(inv.File)
	if err != nil {
		return inv, fmt.Errorf("inspect %s rank %d: %w", m.Dataset, m.Rank, err)
	}
	defer rf.Close()
	h := rf.Header()
	inv.Header = h
	inv.Files, inv.DataBytes = len(h.Members[0].Files), h.Members[0].Logical
	if err := headerMatches(h, p, m); err != nil {
		return inv, fmt.Errorf("inspect %s rank %d: %w", m.Dataset, m.Rank, err)
	}
	if err := rf.VerifyAll(nil); err != nil {
		return inv, fmt.Errorf("inspect %s rank %d: %w", m.Dataset, m.Rank, err)
	}
	inv.Problems = files.Missing(m.Dir, h.Members[0].Files)
	if len(inv.Problems) > 0 {
		return inv, fmt.Errorf("inspect %s rank %d: %w: %d entries missing or changed: %s",
			m.Dataset, m.Rank, ErrMismatch, len(inv.Problems), strings.Join(inv.Problems, "; "))
	}
	return inv, nil
}
