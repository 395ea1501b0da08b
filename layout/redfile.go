package layout

import (
	"fmt"
	"strconv"
	"strings"
)

// redsetSuffix ends every redundancy file name, as in redset.
const redsetSuffix = ".redset"

// RedundancyFileName returns the name of a redundancy file in redset's
// pattern <node>.<kind>.grp_<group+1>_of_<groups>.mem_<member+1>_of_<members>.redset,
// e.g. "5.xor.grp_2_of_4.mem_3_of_8.redset". group and member are 0-based in
// scrfs and 1-based in the name, as redset writes d->group_id+1 and d->rank+1.
//
// The caller provides node >= 0, kind one of the Kind constants (lowercase
// letters and digits), 0 <= group < groups and 0 <= member < members; for
// those inputs ParseRedundancyFileName returns them back.
func RedundancyFileName(node int, kind string, group, groups, member, members int) string {
	return fmt.Sprintf("%d.%s.grp_%d_of_%d.mem_%d_of_%d%s", node, kind, group+1, groups, member+1, members, redsetSuffix)
}

// ParseRedundancyFileName parses a name made by RedundancyFileName and
// returns its parts with group and member 0-based again. Numbers must be
// plain decimal without sign or leading zeros, kind lowercase letters and
// digits, group < groups and member < members; anything else is an error
// wrapping ErrFileName, so stray files in a dataset's metadata directory are
// told apart from redundancy files.
func ParseRedundancyFileName(name string) (node int, kind string, group, groups, member, members int, err error) {
	fail := func(why string) (int, string, int, int, int, int, error) {
		return 0, "", 0, 0, 0, 0, fmt.Errorf("%w: %q: %s", ErrFileName, short(name), why)
	}
	rest, ok := strings.CutSuffix(name, redsetSuffix)
	if !ok {
		return fail("missing " + redsetSuffix + " suffix")
	}
	f := strings.Split(rest, ".")
	if len(f) != 4 {
		return fail("want <node>.<kind>.grp_<g>_of_<n>.mem_<m>_of_<n>")
	}
	if node, err = parseNameNumber(f[0]); err != nil {
		return fail("node: " + err.Error())
	}
	kind = f[1]
	if kind == "" {
		return fail("empty scheme kind")
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return fail("scheme kind must be lowercase letters and digits")
		}
	}
	g1, groups, err := parseOf(f[2], "grp_")
	if err != nil {
		return fail(err.Error())
	}
	m1, members, err := parseOf(f[3], "mem_")
	if err != nil {
		return fail(err.Error())
	}
	return node, kind, g1 - 1, groups, m1 - 1, members, nil
}

// parseOf parses "<prefix><i>_of_<n>" with 1 <= i <= n.
func parseOf(s, prefix string) (i, n int, err error) {
	body, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, 0, fmt.Errorf("%q does not start with %s", short(s), prefix)
	}
	a, b, ok := strings.Cut(body, "_of_")
	if !ok {
		return 0, 0, fmt.Errorf("%q lacks _of_", short(s))
	}
	if i, err = parseNameNumber(a); err != nil {
		return 0, 0, fmt.Errorf("%s: %v", short(s), err)
	}
	if n, err = parseNameNumber(b); err != nil {
		return 0, 0, fmt.Errorf("%s: %v", short(s), err)
	}
	if i < 1 || i > n {
		return 0, 0, fmt.Errorf("%s: %d is not in 1..%d", short(s), i, n)
	}
	return i, n, nil
}

// parseNameNumber accepts the decimal numbers %d writes for a non-negative
// int: no sign, no leading zeros, no overflow.
func parseNameNumber(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty number")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", short(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a number", short(s))
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", short(s))
	}
	return v, nil
}
