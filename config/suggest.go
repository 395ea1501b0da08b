package config

import "strings"

// suggestSection returns the known table a user most likely meant by the
// unknown table name, or "".
func (s *schema) suggestSection(name string) string {
	if len(name) > 100 {
		return ""
	}
	best, bestD := "", -1
	for _, sec := range s.sections {
		if strings.EqualFold(sec, name) {
			return sec
		}
		if d := distance(strings.ToLower(name), sec); d <= max(1, len(sec)/3) && (bestD < 0 || d < bestD) {
			best, bestD = sec, d
		}
	}
	return best
}

// suggestKey returns the known key ("section.name") a user most likely meant
// by the unknown key section.name, or "" when nothing is close. section ""
// stands for a key written outside any table. It catches, in this order:
// wrong case, the right name in the wrong table ("flush.enabled" for
// "fetch.enabled"), and small typos.
func (s *schema) suggestKey(section, name string) string {
	if len(section)+len(name) > 100 { // not a typo; keeps edit distance cheap
		return ""
	}
	section, name = strings.ToLower(section), strings.ToLower(name)
	full := section + "." + name
	for i := range s.fields {
		f := &s.fields[i]
		if f.name == name && (f.section == section || section == "") {
			return f.key()
		}
	}
	// The name exists in another table: prefer the table spelt most alike.
	best, bestD := "", -1
	for i := range s.fields {
		f := &s.fields[i]
		if f.name == name {
			if d := distance(section, f.section); bestD < 0 || d < bestD {
				best, bestD = f.key(), d
			}
		}
	}
	if best != "" {
		return best
	}
	for i := range s.fields {
		f := &s.fields[i]
		d := distance(name, f.name)
		if section != "" {
			d = distance(full, f.key())
		}
		if d <= max(2, len(f.name)/3) && (bestD < 0 || d < bestD) {
			best, bestD = f.key(), d
		}
	}
	return best
}

// didYouMean formats a suggestion for an error message, or "" for none.
func didYouMean(s string) string {
	if s == "" {
		return ""
	}
	return " (did you mean " + s + "?)"
}

// distance is the Levenshtein edit distance between a and b, in bytes (keys
// are ASCII; anything else is far from every key anyway).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
