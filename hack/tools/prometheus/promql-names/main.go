// Command promql-names prints the metric names PromQL expressions select, with Prometheus' own parser: the test
// that checks the monitoring kit against the running binary feeds it every expression of the alert rules and the
// dashboard. It reads a JSON array of expressions on stdin and writes a JSON object from each expression to its
// sorted metric names; an expression that does not parse fails the command with the parser's error.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		return fmt.Errorf("reading the expressions (a JSON array of strings): %w", err)
	}
	names := map[string][]string{}
	for _, expr := range exprs {
		n, err := metricNames(expr)
		if err != nil {
			return fmt.Errorf("parsing %q: %w", expr, err)
		}
		names[expr] = n
	}
	return json.NewEncoder(os.Stdout).Encode(names)
}

// metricNames are the names every vector selector of expr matches by equality; a selector without one (a regular
// expression on __name__, say) is an error, since its metrics cannot be checked by name.
func metricNames(expr string) ([]string, error) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var selectorErr error
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			selectorErr = fmt.Errorf("selector %s names no metric", vs)
			return selectorErr
		}
		names = append(names, name)
		return nil
	})
	if selectorErr != nil {
		return nil, selectorErr
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
