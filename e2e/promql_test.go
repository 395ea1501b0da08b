package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Just enough of PromQL to name the metrics an expression selects, so the
// dashboard and alert tests can hold them against a live exposition.

// promqlKeywords are identifiers that are not metric names.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"inf": true, "nan": true, "start": true, "end": true,
}

// promqlMetricNames returns the metric names a PromQL expression selects,
// sorted and without duplicates. It tokenizes just enough for that: label
// matchers {…}, ranges […], strings and numbers are skipped; an identifier
// followed by "(" is a function, one after by/on/… opens a label list.
func promqlMetricNames(expr string) ([]string, error) {
	var names []string
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	nextNonSpace := func(i int) byte {
		for ; i < len(expr); i++ {
			if expr[i] != ' ' && expr[i] != '\t' && expr[i] != '\n' && expr[i] != '\r' {
				return expr[i]
			}
		}
		return 0
	}
	// skipString returns the index after the string literal starting at i.
	skipString := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unclosed %c in %s", q, expr)
	}
	// skipTo returns the index after the closer matching the opener at i,
	// stepping over strings.
	skipTo := func(i int, closer byte) (int, error) {
		for j := i + 1; j < len(expr); {
			switch expr[j] {
			case '"', '\'', '`':
				k, err := skipString(j)
				if err != nil {
					return 0, err
				}
				j = k
			case closer:
				return j + 1, nil
			default:
				j++
			}
		}
		return 0, fmt.Errorf("unclosed %q in %s", expr[i], expr)
	}
	skipLabels := false // the next "(" opens a label list
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{':
			j, err := skipTo(i, '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j, err := skipTo(i, ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '(' && skipLabels:
			j, err := skipTo(i, ')')
			if err != nil {
				return nil, err
			}
			i, skipLabels = j, false
		case c >= '0' && c <= '9' || c == '.':
			// Numbers, including 1e9 and durations after offset.
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			switch {
			case word == "by" || word == "without" || word == "on" || word == "ignoring" ||
				word == "group_left" || word == "group_right":
				skipLabels = nextNonSpace(j) == '('
			case promqlKeywords[strings.ToLower(word)]:
			case nextNonSpace(j) == '(':
				// A function call.
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	sort.Strings(names)
	return slices.Compact(names), nil
}

func TestPromqlMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum by (le, op) (rate(a_bucket{op="x", y=~"a(b)c"}[5m])) * on (instance, job) group_left (node) info{j=~".*"}`,
			[]string{"a_bucket", "info"}},
		{`time() - max(ts > 0) > 6 * 3600 and on (job_id) x offset 30m`, []string{"ts", "x"}},
		{`histogram_quantile(0.95, sum without (pod) (increase(h_bucket[1h])))`, []string{"h_bucket"}},
		{`count(a == 0) or vector(0)`, []string{"a"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)")`, []string{"m"}},
		{`sum(b) by (x) / sum(b)`, []string{"b"}},
		{`1e3 * c:rate5m`, []string{"c:rate5m"}},
	} {
		got, err := promqlMetricNames(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("promqlMetricNames(%s) = %v, %v; want %v", c.expr, got, err, c.want)
		}
	}
	if _, err := promqlMetricNames(`a{b="c"`); err == nil {
		t.Error("an unclosed matcher was accepted")
	}
}
