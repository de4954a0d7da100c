// Package doctest reads the shell blocks of the user documents, so that a test can run them as a user pastes
// them: a quickstart that no longer works fails a test instead of its first reader.
//
// A shell block is a fenced code block of language sh, bash, shell or console. It is one of two kinds:
//   - a script: commands as a user pastes them; it passes when every command succeeds;
//   - a transcript: lines starting with "$ " are commands (a line ending in a backslash continues on the next),
//     lines starting with "#" are comments, and the other lines are what the command before them prints, which
//     the run must print too (see Match).
//
// A block the tests cannot run says why in an HTML comment on the line above its fence, which Markdown does not
// render: <!-- doctest: skip: REASON -->. A block that needs pods to start (installing the operator's Deployment,
// reading its pod's logs) says so the same way, <!-- doctest: node -->: it runs only where the page runs on a real
// node. Every other shell block runs wherever the page runs.
//
// What a page assumes the reader has already (a landscape to debug, say) is made by a setup block, a comment
// that Markdown does not render either: "<!-- doctest: setup", the commands on the lines after it, then "-->".
// It runs where it stands, as a script; "<!-- doctest: node setup" opens one that runs only on a real node.
package doctest

import (
	"fmt"
	"regexp"
	"strings"
)

// Block is one shell block of a document.
type Block struct {
	// File and Line locate the block's opening fence (lines count from 1).
	File string
	Line int
	// Skip is the reason the block is not run, empty when it runs.
	Skip string
	// Setup tells that the block is a setup comment rather than a shown block.
	Setup bool
	// Node tells that the block runs only on a real node, where pods start.
	Node bool
	// Text is the block's content, its last line ending in a newline.
	Text string
}

// Step is one command of a block and, for a transcript, what it prints.
type Step struct {
	Command string
	// Output is the transcript's lines after the command; nil where the document shows none (a script, or a
	// command shown without its output), and then what the command prints is not checked.
	Output []string
}

var (
	shellLanguages   = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}
	setupComment     = "<!-- doctest: setup"
	nodeSetupComment = "<!-- doctest: node setup"
	skipComment      = regexp.MustCompile(`^<!--\s*doctest:\s*skip:\s*(.*?)\s*-->$`)
	nodeComment      = regexp.MustCompile(`^<!--\s*doctest:\s*node\s*-->$`)
	anyComment       = regexp.MustCompile(`^<!--\s*doctest:`)
)

// Parse returns the shell blocks of a Markdown document. A doctest comment that is not a skip with its reason,
// or that stands above no shell block, is an error: a marker that does nothing would hide a block from the tests
// without anyone noticing.
func Parse(file, markdown string) ([]Block, error) {
	var (
		blocks  []Block
		current *Block
		fence   string
		pending *Block // what the comment on the line before says of the block below it
		pendAt  int
	)
	lines := strings.Split(markdown, "\n")
	for i, line := range lines {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if current != nil && current.Setup {
			if trimmed == "-->" {
				blocks = append(blocks, *current)
				current = nil
				continue
			}
			current.Text += line + "\n"
			continue
		}
		if current != nil {
			if trimmed == fence {
				blocks = append(blocks, *current)
				current, fence = nil, ""
				continue
			}
			current.Text += line + "\n"
			continue
		}
		if fence != "" {
			// Inside a block of another language.
			if trimmed == fence {
				fence = ""
			}
			continue
		}
		if open, lang, ok := opening(trimmed); ok {
			fence = open
			if shellLanguages[lang] {
				current = &Block{File: file, Line: n}
				if pending != nil {
					current.Skip, current.Node = pending.Skip, pending.Node
				}
			} else if pending != nil {
				return nil, fmt.Errorf("%s:%d: a doctest comment stands above a %q block, not a shell block", file, pendAt, lang)
			}
			pending = nil
			continue
		}
		if pending != nil {
			return nil, fmt.Errorf("%s:%d: a doctest comment must stand on the line right above a shell block's fence", file, pendAt)
		}
		switch m := skipComment.FindStringSubmatch(trimmed); {
		case trimmed == setupComment || trimmed == nodeSetupComment:
			current = &Block{File: file, Line: n, Setup: true, Node: trimmed == nodeSetupComment}
		case m != nil:
			if m[1] == "" {
				return nil, fmt.Errorf("%s:%d: doctest: skip needs its reason", file, n)
			}
			pending, pendAt = &Block{Skip: m[1]}, n
		case nodeComment.MatchString(trimmed):
			pending, pendAt = &Block{Node: true}, n
		case anyComment.MatchString(trimmed):
			return nil, fmt.Errorf("%s:%d: unknown doctest comment %q (want <!-- doctest: skip: REASON -->, <!-- doctest: node --> or a setup block)", file, n, trimmed)
		}
	}
	if current != nil && current.Setup {
		return nil, fmt.Errorf("%s:%d: a doctest setup comment is not closed (-->)", file, current.Line)
	}
	if current != nil || fence != "" {
		return nil, fmt.Errorf("%s: a code block is not closed", file)
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: a doctest comment stands above no block", file, pendAt)
	}
	return blocks, nil
}

// opening reads a fence that opens a code block: its fence (``` or longer) and its language.
func opening(line string) (fence, lang string, ok bool) {
	if !strings.HasPrefix(line, "```") {
		return "", "", false
	}
	rest := strings.TrimLeft(line, "`")
	fence = line[:len(line)-len(rest)]
	lang, _, _ = strings.Cut(strings.TrimSpace(rest), " ")
	return fence, lang, true
}

// Transcript tells whether the block shows commands with what they print, rather than commands alone.
func (b Block) Transcript() bool {
	for line := range strings.Lines(b.Text) {
		if strings.HasPrefix(line, "$ ") {
			return true
		}
	}
	return false
}

// Steps splits the block into its commands: a script is one step of its whole text; a transcript is one step per
// "$ " command, with the lines it prints.
func (b Block) Steps() []Step {
	if !b.Transcript() {
		return []Step{{Command: b.Text}}
	}
	var (
		steps      []Step
		continuing bool
	)
	for line := range strings.Lines(b.Text) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case continuing:
			steps[len(steps)-1].Command += "\n" + line
			continuing = strings.HasSuffix(line, `\`)
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, Step{Command: strings.TrimPrefix(line, "$ ")})
			continuing = strings.HasSuffix(line, `\`)
		case strings.HasPrefix(line, "#") || len(steps) == 0:
			// A comment, or text before the first command.
		default:
			steps[len(steps)-1].Output = append(steps[len(steps)-1].Output, line)
		}
	}
	return steps
}

// trailingComment is a comment a transcript adds after what a command prints, set off by two spaces.
var trailingComment = regexp.MustCompile(`\s{2,}#\s.*$`)

// Match checks what a command printed against a transcript's lines. Trailing spaces and a comment set off by two
// spaces and "# " are not part of a line; a line "..." stands for any number of lines, and "…" within a line for
// any text (a digest, a time).
func Match(want []string, got string) error {
	gotLines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if strings.TrimSpace(got) == "" {
		gotLines = nil
	}
	for i := range gotLines {
		gotLines[i] = strings.TrimRight(gotLines[i], " \t")
	}
	patterns := make([]*regexp.Regexp, len(want))
	for i, w := range want {
		w = strings.TrimRight(trailingComment.ReplaceAllString(w, ""), " \t")
		if w == "..." {
			continue
		}
		parts := strings.Split(w, "…")
		for j, p := range parts {
			parts[j] = regexp.QuoteMeta(p)
		}
		patterns[i] = regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	}
	if !matchLines(patterns, gotLines) {
		return fmt.Errorf("printed\n%s\nwant\n%s", strings.Join(gotLines, "\n"), strings.Join(want, "\n"))
	}
	return nil
}

// matchLines matches lines against patterns, a nil pattern standing for any number of lines.
func matchLines(patterns []*regexp.Regexp, lines []string) bool {
	if len(patterns) == 0 {
		return len(lines) == 0
	}
	if patterns[0] == nil {
		for skip := 0; skip <= len(lines); skip++ {
			if matchLines(patterns[1:], lines[skip:]) {
				return true
			}
		}
		return false
	}
	return len(lines) > 0 && patterns[0].MatchString(lines[0]) && matchLines(patterns[1:], lines[1:])
}
