package layout

import (
	"errors"
	"strings"
	"testing"
)

func TestRedundancyFileName(t *testing.T) {
	tests := []struct {
		node                           int
		kind                           string
		group, groups, member, members int
		want                           string
	}{
		// redset: GROUP = 0, GROUPS = 1, RANK = 0, RANKS = 4 for rank 0.
		{0, KindXOR, 0, 1, 0, 4, "0.xor.grp_1_of_1.mem_1_of_4.redset"},
		{5, KindXOR, 1, 4, 2, 8, "5.xor.grp_2_of_4.mem_3_of_8.redset"},
		{3, KindSingle, 3, 4, 0, 1, "3.single.grp_4_of_4.mem_1_of_1.redset"},
		{12, KindPartner, 0, 2, 5, 6, "12.partner.grp_1_of_2.mem_6_of_6.redset"},
		{1023, KindRS, 127, 128, 7, 8, "1023.rs.grp_128_of_128.mem_8_of_8.redset"},
	}
	for _, tt := range tests {
		got := RedundancyFileName(tt.node, tt.kind, tt.group, tt.groups, tt.member, tt.members)
		if got != tt.want {
			t.Errorf("RedundancyFileName(%d, %s, %d, %d, %d, %d) = %q, want %q",
				tt.node, tt.kind, tt.group, tt.groups, tt.member, tt.members, got, tt.want)
			continue
		}
		node, kind, group, groups, member, members, err := ParseRedundancyFileName(got)
		if err != nil {
			t.Errorf("ParseRedundancyFileName(%q): %v", got, err)
			continue
		}
		if node != tt.node || kind != tt.kind || group != tt.group || groups != tt.groups || member != tt.member || members != tt.members {
			t.Errorf("ParseRedundancyFileName(%q) = %d %s %d %d %d %d", got, node, kind, group, groups, member, members)
		}
	}
}

func TestRedundancyFileNameRoundTrip(t *testing.T) {
	for _, kind := range []string{KindSingle, KindPartner, KindXOR, KindRS} {
		for groups := 1; groups <= 5; groups++ {
			for members := 1; members <= 5; members++ {
				for g := 0; g < groups; g++ {
					for m := 0; m < members; m++ {
						node := g*members + m
						name := RedundancyFileName(node, kind, g, groups, m, members)
						n2, k2, g2, gs2, m2, ms2, err := ParseRedundancyFileName(name)
						if err != nil || n2 != node || k2 != kind || g2 != g || gs2 != groups || m2 != m || ms2 != members {
							t.Fatalf("%q: %d %s %d %d %d %d %v", name, n2, k2, g2, gs2, m2, ms2, err)
						}
					}
				}
			}
		}
	}
}

func TestParseRedundancyFileNameErrors(t *testing.T) {
	tests := []struct{ name, want string }{
		{"", "missing .redset suffix"},
		{"rank_3.bin", "missing .redset suffix"},
		{"0.xor.grp_1_of_1.mem_1_of_4.redset.tmp", "missing .redset suffix"},
		{".redset", "want <node>"},
		{"0.xor.grp_1_of_1.mem_1_of_4.x.redset", "want <node>"},
		{"x.xor.grp_1_of_1.mem_1_of_4.redset", "node:"},
		{"-1.xor.grp_1_of_1.mem_1_of_4.redset", "node:"},
		{"01.xor.grp_1_of_1.mem_1_of_4.redset", "leading zero"},
		{"99999999999999999999.xor.grp_1_of_1.mem_1_of_4.redset", "out of range"},
		{"0..grp_1_of_1.mem_1_of_4.redset", "empty scheme kind"},
		{"0.XOR.grp_1_of_1.mem_1_of_4.redset", "lowercase"},
		{"0.xor.grp1_of_1.mem_1_of_4.redset", "does not start with grp_"},
		{"0.xor.grp_1_1.mem_1_of_4.redset", "lacks _of_"},
		{"0.xor.grp_0_of_1.mem_1_of_4.redset", "0 is not in 1..1"},
		{"0.xor.grp_2_of_1.mem_1_of_4.redset", "2 is not in 1..1"},
		{"0.xor.grp_1_of_1.mem_5_of_4.redset", "5 is not in 1..4"},
		{"0.xor.grp_1_of_1.mem_1_of_0.redset", "1 is not in 1..0"},
		{"0.xor.grp_1_of_1.mem_+1_of_4.redset", "not a number"},
		{"0.xor.grp_1_of_1.mem_1_of_4_of_4.redset", "not a number"},
		{"0.xor.grp_1_of_1.meta_1_of_4.redset", "does not start with mem_"},
	}
	for _, tt := range tests {
		_, _, _, _, _, _, err := ParseRedundancyFileName(tt.name)
		if err == nil || !errors.Is(err, ErrFileName) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRedundancyFileName(%q) = %v, want ErrFileName containing %q", tt.name, err, tt.want)
		}
	}
}

func FuzzParseRedundancyFileName(f *testing.F) {
	for _, s := range []string{
		"0.xor.grp_1_of_1.mem_1_of_4.redset", "5.rs.grp_2_of_4.mem_3_of_8.redset",
		"3.single.grp_4_of_4.mem_1_of_1.redset", "01.xor.grp_1_of_1.mem_1_of_4.redset",
		"0.xor.grp_0_of_1.mem_1_of_4.redset", ".redset", "x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		node, kind, group, groups, member, members, err := ParseRedundancyFileName(name)
		if err != nil {
			if !errors.Is(err, ErrFileName) {
				t.Fatalf("error %v does not wrap ErrFileName", err)
			}
			return
		}
		if node < 0 || group < 0 || group >= groups || member < 0 || member >= members {
			t.Fatalf("%q parsed to out-of-range parts %d %d/%d %d/%d", name, node, group, groups, member, members)
		}
		// Accepted names are exactly the canonical ones.
		if again := RedundancyFileName(node, kind, group, groups, member, members); again != name {
			t.Fatalf("%q parses to parts that name %q", name, again)
		}
	})
}
