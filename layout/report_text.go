package layout

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// String prints the report as the table scrfs layout shows: the scheme, one
// row per set (members in rank order, their domains, who holds their copies
// or metadata, member failures survived, domain failures survived per level)
// and a last row with the job's tolerance per level, then any problem and
// warnings.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scheme %s: %s in %s; %s\n", r.Scheme, plural(r.Nodes, "node"), plural(len(r.Sets), "set"), survivesText(r))
	fmt.Fprintf(&b, "failure domains: %s\n", strings.Join(r.Levels, " > "))
	if r.Problem != "" {
		fmt.Fprintf(&b, "PROBLEM: %s\n", r.Problem)
	}
	b.WriteByte('\n')

	showDomains := len(r.Levels) > 1
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	head := []string{"set", "members"}
	if showDomains {
		head = append(head, "domains")
	}
	head = append(head, holdersTitle(r.Scheme.Kind), "survives")
	head = append(head, r.Levels...)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, s := range r.Sets {
		row := []string{strconv.Itoa(s.ID), joinInts(s.Members, " ")}
		if showDomains {
			row = append(row, strings.Join(s.Domains, " "))
		}
		row = append(row, holdersText(s), plural(s.Failures, "member"))
		for _, t := range s.Tolerance {
			row = append(row, strconv.Itoa(t))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	row := []string{"job", ""}
	if showDomains {
		row = append(row, "")
	}
	row = append(row, "", "")
	for _, t := range r.Tolerance {
		row = append(row, strconv.Itoa(t))
	}
	fmt.Fprintln(tw, strings.Join(row, "\t"))
	tw.Flush()

	if len(r.Warnings) > 0 {
		b.WriteString("\nwarnings:\n")
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "  %s\n", w)
		}
	}
	return b.String()
}

func survivesText(r Report) string {
	if len(r.Tolerance) == 0 {
		return "no sets"
	}
	var parts []string
	for i, t := range r.Tolerance {
		parts = append(parts, plural(t, r.Levels[i]+" failure"))
	}
	return "tolerates " + strings.Join(parts, " or ") + " at once"
}

func holdersTitle(kind string) string {
	switch kind {
	case KindPartner:
		return "copies on"
	case KindXOR, KindRS:
		return "metadata on"
	}
	return "redundancy"
}

// holdersText writes "0>4,8 4>8,0": member, then the nodes that hold its
// copies (or metadata).
func holdersText(s SetReport) string {
	if len(s.Holders) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(s.Members))
	for r, h := range s.Holders {
		parts = append(parts, strconv.Itoa(s.Members[r])+">"+joinInts(h, ","))
	}
	return strings.Join(parts, " ")
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
