package doctest

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		markdown string
		want     []Block
		err      string
	}{
		{
			name:     "shell blocks of every language, others left out",
			markdown: "text\n```sh\nmake demo\n```\n```yaml\nkind: X\n```\n```bash\na\nb\n```\n````console\n$ x\n````\n```\nplain\n```\n",
			want: []Block{
				{File: "d.md", Line: 2, Text: "make demo\n"},
				{File: "d.md", Line: 8, Text: "a\nb\n"},
				{File: "d.md", Line: 12, Text: "$ x\n"},
			},
		},
		{
			name:     "a skip comment right above the fence",
			markdown: "<!-- doctest: skip: needs Docker -->\n```sh\nmake docker-build\n```\n```sh\nls\n```\n",
			want: []Block{
				{File: "d.md", Line: 2, Skip: "needs Docker", Text: "make docker-build\n"},
				{File: "d.md", Line: 5, Text: "ls\n"},
			},
		},
		{
			name:     "a fence inside a block of another language",
			markdown: "````markdown\n```sh\nnot a block\n```\n````\n```sh\nls\n```\n",
			want:     []Block{{File: "d.md", Line: 6, Text: "ls\n"}},
		},
		{
			name:     "a setup comment",
			markdown: "# Debugging\n<!-- doctest: setup\nkubectl create namespace shop\n-->\n```sh\nkubectl -n shop get vd\n```\n",
			want: []Block{
				{File: "d.md", Line: 2, Setup: true, Text: "kubectl create namespace shop\n"},
				{File: "d.md", Line: 5, Text: "kubectl -n shop get vd\n"},
			},
		},
		{
			name:     "blocks and a setup comment for a real node",
			markdown: "<!-- doctest: node -->\n```sh\nmake deploy\n```\n<!-- doctest: node setup\nmake undeploy\n-->\n```sh\nls\n```\n",
			want: []Block{
				{File: "d.md", Line: 2, Node: true, Text: "make deploy\n"},
				{File: "d.md", Line: 5, Setup: true, Node: true, Text: "make undeploy\n"},
				{File: "d.md", Line: 8, Text: "ls\n"},
			},
		},
		{name: "node away from the fence", markdown: "<!-- doctest: node -->\ntext\n```sh\nls\n```\n", err: "right above"},
		{name: "node with a reason", markdown: "<!-- doctest: node: pods -->\n```sh\nls\n```\n", err: "unknown doctest comment"},
		{name: "an unclosed setup comment", markdown: "<!-- doctest: setup\nls\n", err: "not closed (-->)"},
		{name: "skip without a reason", markdown: "<!-- doctest: skip: -->\n```sh\nls\n```\n", err: "needs its reason"},
		{name: "skip away from the fence", markdown: "<!-- doctest: skip: why -->\n\n```sh\nls\n```\n", err: "right above"},
		{name: "skip above another language", markdown: "<!-- doctest: skip: why -->\n```yaml\na: b\n```\n", err: "not a shell block"},
		{name: "unknown comment", markdown: "<!-- doctest: run -->\n```sh\nls\n```\n", err: "unknown doctest comment"},
		{name: "skip above nothing", markdown: "text\n<!-- doctest: skip: why -->", err: "above no block"},
		{name: "unclosed block", markdown: "```sh\nls\n", err: "not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("d.md", tt.markdown)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse: %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []Step
	}{
		{name: "a script is one step", text: "kubectl create namespace shop\n# apply\nkubectl apply -f x\n",
			want: []Step{{Command: "kubectl create namespace shop\n# apply\nkubectl apply -f x\n"}}},
		{
			name: "a transcript: commands, continuations, comments and output",
			text: "# first\n$ a --flag \\\n    --more\nout 1\nout 2\n# between\n$ b &  # background\n$ c; echo $?\n1\n",
			want: []Step{
				{Command: "a --flag \\\n    --more", Output: []string{"out 1", "out 2"}},
				{Command: "b &  # background"},
				{Command: "c; echo $?", Output: []string{"1"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Block{Text: tt.text}).Steps(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Steps:\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		name string
		want []string
		got  string
		ok   bool
	}{
		{"equal, trailing spaces aside", []string{"a", "b"}, "a  \nb\n", true},
		{"a different line", []string{"a", "b"}, "a\nc\n", false},
		{"a missing line", []string{"a", "b"}, "a\n", false},
		{"an extra line", []string{"a"}, "a\nb\n", false},
		{"a trailing comment is not output", []string{"app-1-2-3-e1mvwibzp5      # collisionCount 0"}, "app-1-2-3-e1mvwibzp5\n", true},
		{"… stands for any text", []string{"verified shop (sha256:…) and 3 artifacts"}, "verified shop (sha256:abc) and 3 artifacts\n", true},
		{"… matches within the line only", []string{"x…"}, "y1\n", false},
		{"... stands for lines", []string{"{", "...", "}"}, "{\n  a\n  b\n}\n", true},
		{"... stands for no line", []string{"a", "...", "b"}, "a\nb\n", true},
		{"... at the end", []string{"a", "..."}, "a\nb\nc\n", true},
		{"nothing printed", []string{"a"}, "", false},
		{"regexp characters are literal", []string{"a.b (x)"}, "aXb (x)\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Match(tt.want, tt.got); (err == nil) != tt.ok {
				t.Errorf("Match(%q, %q) = %v, want ok %v", tt.want, tt.got, err, tt.ok)
			}
		})
	}
}
