package redfile

import "errors"

// ErrCorrupt is wrapped by every error about a redundancy file that fails
// its checks — bad magic or version, CRC mismatch, truncation, impossible
// lengths — naming the file (and the offset).
var ErrCorrupt = errors.New("redundancy data corrupt")
