package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputTable = "table"
)

// outputFormat is the value of -o: one of the formats its command offers, checked as the flag is parsed, so that
// a format the command lacks is a usage error. Empty is the command's own human format.
type outputFormat struct {
	value   string
	allowed []string
}

// bindOutput registers -o with the formats a command offers and its default ("" for its human format).
func bindOutput(f *pflag.FlagSet, def, usage string, allowed ...string) *outputFormat {
	o := &outputFormat{value: def, allowed: allowed}
	f.VarP(o, "output", "o", usage)
	return o
}

func (o *outputFormat) String() string { return o.value }
func (o *outputFormat) Type() string   { return "format" }

func (o *outputFormat) Set(v string) error {
	if !slices.Contains(o.allowed, v) {
		return fmt.Errorf("unknown output format (want %s)", strings.Join(o.allowed, " or "))
	}
	o.value = v
	return nil
}

// structured tells whether the format is one printStructured writes.
func (o *outputFormat) structured() bool { return o.value == outputJSON || o.value == outputYAML }

// printStructured writes v as JSON (indented) or YAML, with the same field names: sigs.k8s.io/yaml goes through
// the JSON encoding, as kubectl's -o yaml does.
func printStructured(w io.Writer, format string, v any) error {
	if format == outputYAML {
		y, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
