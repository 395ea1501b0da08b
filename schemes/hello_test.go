package schemes

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/redfile"
)

// FuzzPeerMessages feeds the decoders of what peers send: hellos, member
// records and abort messages.
func FuzzPeerMessages(f *testing.F) {
	h, _ := json.Marshal(hello{Op: "rebuild", Kind: "rs", Size: 3, Metas: []redfile.MemberMeta{{Rank: 1, Logical: 3, Files: []files.Meta{{Path: "f", Type: files.Regular, Size: 3}}}}})
	f.Add(h)
	m, _ := json.Marshal(redfile.MemberMeta{Rank: 2, Files: []files.Meta{{Path: "d", Type: files.Dir}, {Path: "d/s", Type: files.Symlink, Target: "/x"}}})
	f.Add(m)
	f.Add(encodeAbort(1, ErrCorrupt)[frameLen:])
	f.Fuzz(func(t *testing.T, data []byte) {
		var hl hello
		if json.Unmarshal(data, &hl) == nil {
			own := hello{Op: "rebuild", Kind: "rs", Size: 3}
			_ = own.check(&hl, 1)
			for i := range hl.Metas {
				_ = checkMeta(&hl.Metas[i], hl.Metas[i].Rank)
			}
		}
		var mm redfile.MemberMeta
		if json.Unmarshal(data, &mm) == nil {
			if checkMeta(&mm, mm.Rank) == nil {
				for _, fm := range mm.Files {
					if files.CheckPath(fm.Path) != nil {
						t.Fatalf("accepted path %q", fm.Path)
					}
				}
			}
		}
		if err := decodeAbort(data); !errors.Is(err, ErrAborted) {
			t.Fatalf("abort decoded to %v", err)
		}
	})
}
