package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

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
// the JSON encoding, as kubectl's -o yaml does. A status or a registry may have put any character into v; what is
// written holds no character a terminal acts on instead of showing it (see escapeJSON).
func printStructured(w io.Writer, format string, v any) error {
	if format == outputYAML {
		// The YAML emitter refuses control characters and writes other characters that are not printable (the
		// bidirectional overrides) as they are: such a document is written as escaped JSON, which is YAML too, of
		// the same values. An error of the JSON encoding, which sigs.k8s.io/yaml goes through, is printJSON's too.
		y, err := yaml.Marshal(v)
		if err != nil || !isPrintableDocument(y) {
			return printJSON(w, v)
		}
		_, err = w.Write(y)
		return err
	}
	return printJSON(w, v)
}

// printJSON writes v as indented JSON with every character that is not printable escaped (see escapeJSON).
func printJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSON(b.Bytes()))
	return err
}

// escapeJSON is the encoded JSON doc with each character that is not printable (but the line breaks of the
// indentation) written as a \u escape: encoding/json escapes C0 controls, not DEL, the C1 controls (U+009B is a
// terminal's CSI) or the bidirectional overrides a registry or a status may hold. Outside its strings, encoded
// JSON holds only printable ASCII and line breaks, so the escapes land in strings and the document decodes to the
// same values.
func escapeJSON(doc []byte) []byte {
	if isPrintableDocument(doc) {
		return doc
	}
	out := make([]byte, 0, len(doc))
	for _, r := range string(doc) {
		if r == '\n' || unicode.IsPrint(r) {
			out = utf8.AppendRune(out, r)
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}

// isPrintableDocument tells whether doc holds only printable characters and line breaks.
func isPrintableDocument(doc []byte) bool {
	return !bytes.ContainsFunc(doc, func(r rune) bool { return r != '\n' && !unicode.IsPrint(r) })
}
