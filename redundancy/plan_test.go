package redundancy

import (
	"slices"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/cache"
	"github.com/scrfs/scrfs/schemes"
)

// inv builds an inventory: each spec is "name" (intact) or "name!" (present
// but not verifiable).
func inv(node int, specs ...string) *inventoryMsg {
	m := &inventoryMsg{Node: node}
	for i, s := range specs {
		name, damaged := strings.CutSuffix(s, "!")
		m.Datasets = append(m.Datasets, invDataset{Name: name, Kind: cache.KindDir, Root: name, ID: uint64(10 + i), State: cache.Protected, Intact: !damaged})
	}
	return m
}

func TestPlan(t *testing.T) {
	xor := schemes.Params{Kind: schemes.XOR, Size: 4}
	rs := schemes.Params{Kind: schemes.RS, Size: 4, Parity: 2}
	partner := schemes.Params{Kind: schemes.Partner, Size: 4, Replicas: 1}
	nodes := []int{10, 11, 12, 13}
	tests := []struct {
		name   string
		p      schemes.Params
		invs   map[int]*inventoryMsg
		want   actionKind // "" = nothing to do
		lost   []int
		reason string
	}{
		{"all intact", xor, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11, "c"), 12: inv(12, "c"), 13: inv(13, "c")}, "", nil, ""},
		{"replacement with empty cache", xor, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11, "c"), 12: inv(12), 13: inv(13, "c")}, actRebuild, []int{2}, ""},
		{"corrupt copy counts as lost", xor, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11, "c!"), 12: inv(12, "c"), 13: inv(13, "c")}, actRebuild, []int{1}, ""},
		{"two lost beyond xor", xor, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11), 12: inv(12), 13: inv(13, "c")}, actFail, nil, "nodes 11, 12"},
		{"two lost within rs k=2", rs, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11), 12: inv(12), 13: inv(13, "c")}, actRebuild, []int{1, 2}, ""},
		{"lost member unreachable", xor, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11, "c"), 13: inv(13, "c")}, actDegrade, nil, "node 12 unreachable"},
		{"unreachable plus lost within xor", xor, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11), 13: inv(13, "c")}, actDegrade, nil, "rebuild waits for node 12"},
		{"unreachable never counts as lost", xor, map[int]*inventoryMsg{10: inv(10, "c")}, actDegrade, nil, "nodes 11, 12, 13 unreachable"},
		{"lost beyond xor while another is away", xor, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11), 12: inv(12)}, actFail, nil, "nodes 11, 12"},
		{"partner adjacent loss", partner, map[int]*inventoryMsg{10: inv(10, "c"), 11: inv(11), 12: inv(12), 13: inv(13, "c")}, actFail, nil, ""},
		{"partner spaced loss", partner, map[int]*inventoryMsg{10: inv(10), 11: inv(11, "c"), 12: inv(12), 13: inv(13, "c")}, actRebuild, []int{0, 2}, ""},
		{"never encoded, all present", xor, map[int]*inventoryMsg{10: inv(10, "c!"), 11: inv(11, "c!"), 12: inv(12, "c!"), 13: inv(13, "c!")}, actProtect, nil, ""},
		{"never encoded, one missing", xor, map[int]*inventoryMsg{10: inv(10, "c!"), 11: inv(11), 12: inv(12, "c!"), 13: inv(13, "c!")}, actFail, nil, "node 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acts := plan(tt.p, nodes, tt.invs)
			if tt.want == "" {
				if len(acts) != 0 {
					t.Fatalf("plan %+v, want nothing", acts)
				}
				return
			}
			if len(acts) != 1 {
				t.Fatalf("plan %+v, want one action", acts)
			}
			a := acts[0]
			if a.Kind != tt.want || !slices.Equal(a.Lost, tt.lost) || !strings.Contains(a.Reason, tt.reason) {
				t.Fatalf("got %s lost %v reason %q; want %s lost %v reason containing %q", a.Kind, a.Lost, a.Reason, tt.want, tt.lost, tt.reason)
			}
		})
	}
}

func TestPlanNewestFirst(t *testing.T) {
	xor := schemes.Params{Kind: schemes.XOR, Size: 2}
	invs := map[int]*inventoryMsg{0: inv(0, "old", "new"), 1: inv(1)}
	acts := plan(xor, []int{0, 1}, invs)
	if len(acts) != 2 || acts[0].Dataset.Name != "new" || acts[1].Dataset.Name != "old" {
		t.Fatalf("order %+v", acts)
	}
}
