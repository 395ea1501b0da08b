package schemes

import (
	"path/filepath"

	"github.com/scrfs/scrfs/layout"
)

// fileName returns the redundancy file name of member rank, as redset names
// it (layout.RedundancyFileName).
func fileName(kind Kind, set SetInfo, rank int) string {
	return layout.RedundancyFileName(set.Nodes[rank], kind.String(), set.Group, set.Groups, rank, len(set.Nodes))
}

// redPath returns where member m keeps its redundancy file.
func redPath(p Params, m Member) string {
	return filepath.Join(m.Dir, layout.MetaDir, fileName(p.Kind, m.Set, m.Rank))
}
